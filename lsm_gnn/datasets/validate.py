"""Checks on what a dataset writer accepts: node ids, labels, splits and static scores.

Shared by `DatasetWriter` (synthetic and real datasets) and `lsm-gnn dataset import`. Every
check names where the values came from (`origin`), the field, what was expected and what was
found. An `origin` that is a path (`pathlib.Path`) is a file the user gave: the error is a
`DataError` naming that file. A string names an argument or API call: the error is an
`InputError`. Ids are never truncated: a float id array is refused, whatever its values.
"""

from __future__ import annotations

import os
from typing import NoReturn

import numpy as np

from lsm_gnn.utils.errors import DataError, InputError

INT64_MAX = np.iinfo(np.int64).max


def fail(origin, problem: str, *, expected=None, found=None) -> NoReturn:
    """Raise DataError (origin is a path) or InputError (origin names an argument)."""
    if isinstance(origin, os.PathLike):
        raise DataError(origin, problem, expected=expected, found=found)
    msg = f"{origin}: {problem}"
    if expected is not None or found is not None:
        msg += f" (expected {expected}, found {found})"
    raise InputError(msg)


def integer_ids(values, origin, field: str, *, what: str = "ids") -> np.ndarray:
    """`values` as a 1-D int64 array; anything but an integer dtype is refused (empty arrays pass)."""
    a = np.asarray(values)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        fail(origin, f"field {field}: {what} must be a 1-D array", expected="shape (n,)", found=f"shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind not in "iu":
        fail(origin, f"field {field}: {what} must be integers (float {what} are never truncated)",
             expected="an integer dtype", found=a.dtype)
    if a.dtype.kind == "u" and a.dtype.itemsize >= 8 and int(a.max()) > INT64_MAX:
        fail(origin, f"field {field}: {what} exceed the int64 range", expected=f"<= {INT64_MAX}", found=int(a.max()))
    return a.astype(np.int64, copy=False)


def ids_in_range(ids: np.ndarray, num_nodes: int, origin, field: str, *, entry: str = "entry",
                 first_entry: int = 0):
    """Every id in [0, num_nodes); the error names the first bad entry (numbered from `first_entry`)."""
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        bad = int(np.flatnonzero((ids < 0) | (ids >= num_nodes))[0])
        fail(origin, f"field {field}: id out of range at {entry} {bad + first_entry}",
             expected=f"an id in [0, {num_nodes})", found=int(ids[bad]))


def node_count(value, origin, field: str = "num_nodes") -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        fail(origin, f"field {field}: must be a non-negative integer", expected="an integer >= 0", found=repr(value))
    return int(value)


def class_count(value, origin, field: str = "num_classes") -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        fail(origin, f"field {field}: must be an integer >= 1", expected="an integer >= 1", found=repr(value))
    return int(value)


def labels(values, num_nodes: int, num_classes: int, origin, field: str = "labels") -> np.ndarray:
    """int64 labels, one per node, each -1 (unlabelled) or a class in [0, num_classes)."""
    num_classes = class_count(num_classes, origin)
    a = np.asarray(values)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.shape != (num_nodes,):
        fail(origin, f"field {field}: one label per node", expected=f"shape ({num_nodes},)", found=f"shape {a.shape}")
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind not in "iu":
        fail(origin, f"field {field}: labels must be integer class ids (-1 = unlabelled; float labels are "
             "never truncated)", expected="an integer dtype", found=a.dtype)
    lo, hi = int(a.min()), int(a.max())
    if lo < -1 or hi >= num_classes:
        bad = int(np.flatnonzero((a < -1) | (a >= num_classes))[0])
        fail(origin, f"field {field}: label of node {bad} out of range",
             expected=f"-1 or a class in [0, {num_classes})", found=int(a[bad]))
    return a.astype(np.int64, copy=False)


def splits(parts: dict, num_nodes: int, label_values: np.ndarray | None, origins: dict, *,
           unlabelled_ok=()) -> dict:
    """{name: int64 ids}: integers, in range, no id twice (within a split or across splits), and
    (with `label_values`) every split node labelled, except in the splits named in `unlabelled_ok`.
    `origins[name]` names where each came from."""
    out = {}
    for name, ids in parts.items():
        a = integer_ids(ids, origins[name], name, what="split ids")
        ids_in_range(a, num_nodes, origins[name], name)
        out[name] = a
    names = list(out)
    if names:
        every = np.concatenate([out[k] for k in names])
        tag = np.repeat(np.arange(len(names)), [out[k].size for k in names])
        order = np.argsort(every, kind="stable")
        s = every[order]
        dup = np.flatnonzero(s[1:] == s[:-1])
        if dup.size:
            i = int(dup[0])
            first, second = names[tag[order[i]]], names[tag[order[i + 1]]]
            node = int(s[i])
            if first == second:
                fail(origins[second], f"field {second}: node {node} appears twice",
                     expected="each id once", found=f"node {node} twice")
            fail(origins[second], f"field {second}: splits must be disjoint, node {node} is also in {first}",
                 expected="no id in two splits", found=f"node {node} in {first} and {second}")
    if label_values is not None:
        for name, a in out.items():
            if a.size and name not in unlabelled_ok:
                unl = a[np.asarray(label_values[a]) < 0]
                if unl.size:
                    fail(origins[name], f"field {name}: {unl.size} split nodes have no label (label -1)",
                         expected="label >= 0 for every split node", found=f"node {int(unl[0])} unlabelled")
    return out


def static_scores(pagerank_u8, degree, num_nodes: int, origin) -> tuple[np.ndarray, np.ndarray]:
    """PageRank bytes (integers in [0, 255]) and degrees (integers >= 0), one per node."""
    out = []
    for field, values, hi in (("pagerank_u8", pagerank_u8, 255), ("degree", degree, None)):
        if values is None:
            fail(origin, f"field {field}: missing", expected=f"{num_nodes} values", found=None)
        a = np.asarray(values)
        if a.shape != (num_nodes,):
            fail(origin, f"field {field}: one value per node", expected=f"shape ({num_nodes},)", found=f"shape {a.shape}")
        if a.size and a.dtype.kind not in "iu":
            fail(origin, f"field {field}: must be integers", expected="an integer dtype", found=a.dtype)
        if a.size and (a.min() < 0 or (hi is not None and a.max() > hi)):
            bad = int(np.flatnonzero((a < 0) | (a > (hi if hi is not None else INT64_MAX)))[0])
            fail(origin, f"field {field}: value of node {bad} out of range",
                 expected=f"[0, {hi}]" if hi is not None else ">= 0", found=int(a[bad]))
        out.append(a)
    return out[0], out[1]
