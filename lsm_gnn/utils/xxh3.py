"""xxh3_64 (seed 0, the default secret) in numba: every row of a 2-D byte array hashed in one call
that holds no GIL.

Written from the public XXH3 specification (Cyan4973/xxHash, doc/xxhash_spec.md, "XXH3 Algorithm
Description"): the five length classes (0, 1-3, 4-8, 9-16 bytes; 17-128 and 129-240 bytes, one
accumulator; over 240 bytes, eight accumulators over 64-byte stripes, 16 stripes a 1024-byte
block, a scramble after each block, the last block's stripes and the last 64 bytes as a stripe).
Its results equal the `xxhash` package's `xxh3_64_intdigest` bit for bit at every length
(tests/test_xxh3.py compares them over every length 0..2100 and beyond).

Why: the row checksums (lsm_gnn/datasets/checksums.py) were one `xxhash` call per row from a
Python loop, which holds the GIL for every row: about 0.6 us a 4 KiB row, 13 ms an iteration of
~21k missed rows on the H200 host, during which the fetch thread and the trainer's thread cannot
run Python. Here the loop over rows is compiled (`nogil=True`): a caller's other threads run while
it hashes, and there is no per-row call.

Input bytes and the secret are read as little-endian words with unaligned native loads (LLVM
`load align 1`), so this module needs a little-endian host (`NATIVE`); the 128-bit product of two
64-bit words is LLVM's i128 multiply; a stripe's eight lanes are one LLVM <8 x i64> vector
(`_accumulate`). Speed (`lsm-gnn bench checksums`; docs/storage.md, "Row checksums"): 30-33 GB/s
on 4 KiB rows in cache against 48-58 GB/s for one `xxhash` call over the same bytes (its AVX-512
path); out of cache both are bound by memory.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

NATIVE = sys.byteorder == "little"
"""The kernels read words in the host's byte order; xxh3 defines them little-endian."""

_U = np.uint64
_P32_1, _P32_2, _P32_3 = _U(0x9E3779B1), _U(0x85EBCA77), _U(0xC2B2AE3D)
_P64_1, _P64_2, _P64_3 = _U(0x9E3779B185EBCA87), _U(0xC2B2AE3D27D4EB4F), _U(0x165667B19E3779F9)
_P64_4, _P64_5 = _U(0x85EBCA77C2B2AE63), _U(0x27D4EB2F165667C5)
_MX1, _MX2 = _U(0x165667919E3779F9), _U(0x9FB21C651E98DF25)
_LO32 = _U(0xFFFFFFFF)

# the default 192-byte secret (the specification's "defaultSecret")
SECRET = np.array([
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
], dtype=np.uint8)
# the secret as 24 little-endian words: the scramble after each block uses words 16..23
_SECRET_WORDS = SECRET.view("<u8").astype(np.uint64)
_STRIPE, _STRIPES_PER_BLOCK = 64, 16
_BLOCK = _STRIPE * _STRIPES_PER_BLOCK    # 1024 bytes
_LAST_STRIPE_SECRET = SECRET.size - 71   # 121: the last stripe's secret offset
_MERGE_SECRET = 11                       # the final merge's secret offset
_MID_SECRET, _MID_LAST_SECRET = 3, 119   # 129-240 bytes: chunks 8.. and the last 16 bytes


def _load(width: int):
    """An intrinsic `load(buf, offset) -> uint64`: the `width` bytes of a 1-D uint8 array at a byte
    offset (no bounds check: the callers stay inside the row), zero-extended."""
    wide = ir.IntType(width * 8)

    @intrinsic
    def load(typingctx, buf, offset):
        sig = types.uint64(buf, offset)

        def codegen(context, builder, signature, args):
            ary, off = args
            array = context.make_array(signature.args[0])(context, builder, ary)
            off = context.cast(builder, off, signature.args[1], types.intp)
            ptr = builder.bitcast(builder.gep(array.data, [off]), wide.as_pointer())
            value = builder.load(ptr, align=1)
            return value if width == 8 else builder.zext(value, ir.IntType(64))

        return sig, codegen

    return load


_load64, _load32 = _load(8), _load(4)


@intrinsic
def _fold128(typingctx, a, b):
    """The full 128-bit product of two uint64, its low and high halves xor-ed (the spec's
    `lowerHalf(m) xor higherHalf(m)`)."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i64, i128 = ir.IntType(64), ir.IntType(128)
        product = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
        high = builder.trunc(builder.lshr(product, ir.Constant(i128, 64)), i64)
        return builder.xor(builder.trunc(product, i64), high)

    return sig, codegen


@numba.njit(inline="always", cache=True)
def _rotl(x, r):  # pragma: no cover - compiled
    return (x << _U(r)) | (x >> _U(64 - r))


@numba.njit(inline="always", cache=True)
def _bswap64(x):  # pragma: no cover - compiled
    out = _U(0)
    for _ in range(8):
        out = (out << _U(8)) | (x & _U(0xFF))
        x >>= _U(8)
    return out


@numba.njit(inline="always", cache=True)
def _avalanche(x):  # pragma: no cover - compiled
    x ^= x >> _U(37)
    x *= _MX1
    return x ^ (x >> _U(32))


@numba.njit(inline="always", cache=True)
def _avalanche_xxh64(x):  # pragma: no cover - compiled
    x ^= x >> _U(33)
    x *= _P64_2
    x ^= x >> _U(29)
    x *= _P64_3
    return x ^ (x >> _U(32))


@numba.njit(inline="always", cache=True)
def _mix16(buf, at, secret_at):  # pragma: no cover - compiled
    """The spec's mixStep with seed 0: 16 input bytes at `at` against 16 secret bytes."""
    return _fold128(_load64(buf, at) ^ _load64(SECRET, secret_at),
                    _load64(buf, at + 8) ^ _load64(SECRET, secret_at + 8))


@numba.njit(inline="always", cache=True)
def _short(buf, at, n):  # pragma: no cover - compiled
    """0-16 bytes."""
    if n > 8:
        low = (_load64(SECRET, 24) ^ _load64(SECRET, 32)) ^ _load64(buf, at)
        high = (_load64(SECRET, 40) ^ _load64(SECRET, 48)) ^ _load64(buf, at + n - 8)
        return _avalanche(_U(n) + _bswap64(low) + high + _fold128(low, high))
    if n >= 4:
        combined = _load32(buf, at + n - 4) | (_load32(buf, at) << _U(32))
        v = (_load64(SECRET, 8) ^ _load64(SECRET, 16)) ^ combined
        v ^= _rotl(v, 49) ^ _rotl(v, 24)
        v *= _MX2
        v ^= (v >> _U(35)) + _U(n)
        v *= _MX2
        return v ^ (v >> _U(28))
    if n > 0:
        combined = (_U(buf[at + n - 1]) | (_U(n) << _U(8)) | (_U(buf[at]) << _U(16))
                    | (_U(buf[at + (n >> 1)]) << _U(24)))
        return _avalanche_xxh64((_load32(SECRET, 0) ^ _load32(SECRET, 4)) ^ combined)
    return _avalanche_xxh64(_load64(SECRET, 56) ^ _load64(SECRET, 64))


@numba.njit(inline="always", cache=True)
def _medium(buf, at, n):  # pragma: no cover - compiled
    """17-240 bytes."""
    acc = _U(n) * _P64_1
    if n <= 128:
        for i in range((n - 1) // 32, -1, -1):
            acc += _mix16(buf, at + 16 * i, 32 * i)
            acc += _mix16(buf, at + n - 16 * i - 16, 32 * i + 16)
        return _avalanche(acc)
    for i in range(8):
        acc += _mix16(buf, at + 16 * i, 16 * i)
    acc = _avalanche(acc)
    for i in range(8, n // 16):
        acc += _mix16(buf, at + 16 * i, 16 * (i - 8) + _MID_SECRET)
    acc += _mix16(buf, at + n - 16, _MID_LAST_SECRET)
    return _avalanche(acc)


@intrinsic
def _accumulate(typingctx, acc, buf, at, secret, secret_at, stripes):
    """The spec's accumulate over `stripes` consecutive 64-byte stripes from byte `at` of `buf`,
    stripe s against the 64 secret bytes from `secret_at + 8 * s`, on `acc` (8 uint64, updated in
    place). Written as LLVM vector code on <8 x i64> (one stripe is one vector: its lanes' input
    words, the 32x32-bit products, the input words swapped pairwise into the neighbour lane): the
    same computation as scalar numba code, which LLVM vectorised across stripes with a transpose
    per stripe and ran at 6-7 GB/s against the `xxhash` package's 8.7 (4 KiB rows, out of cache)."""
    sig = types.void(acc, buf, at, secret, secret_at, stripes)

    def codegen(context, builder, signature, args):
        acc_a, buf_a, at_v, sec_a, sec_at_v, n_v = args
        acc_t, buf_t, at_t, sec_t, sec_at_t, n_t = signature.args
        i64 = ir.IntType(64)
        vec = ir.VectorType(i64, 8)
        accp = builder.bitcast(context.make_array(acc_t)(context, builder, acc_a).data, vec.as_pointer())
        data = context.make_array(buf_t)(context, builder, buf_a).data
        sec = context.make_array(sec_t)(context, builder, sec_a).data
        at_v = context.cast(builder, at_v, at_t, types.intp)
        sec_at_v = context.cast(builder, sec_at_v, sec_at_t, types.intp)
        n_v = context.cast(builder, n_v, n_t, types.intp)
        slot = cgutils.alloca_once(builder, vec)
        builder.store(builder.load(accp, align=8), slot)
        low32 = ir.Constant(vec, [ir.Constant(i64, 0xFFFFFFFF)] * 8)
        shift = ir.Constant(vec, [ir.Constant(i64, 32)] * 8)
        swap = ir.Constant(ir.VectorType(ir.IntType(32), 8), [1, 0, 3, 2, 5, 4, 7, 6])
        with cgutils.for_range(builder, n_v) as loop:
            s = loop.index
            d_off = builder.add(at_v, builder.mul(s, ir.Constant(s.type, _STRIPE)))
            k_off = builder.add(sec_at_v, builder.mul(s, ir.Constant(s.type, 8)))
            d = builder.load(builder.bitcast(builder.gep(data, [d_off]), vec.as_pointer()), align=1)
            k = builder.load(builder.bitcast(builder.gep(sec, [k_off]), vec.as_pointer()), align=1)
            dk = builder.xor(d, k)
            product = builder.mul(builder.and_(dk, low32), builder.lshr(dk, shift))
            swapped = builder.shuffle_vector(d, d, swap)
            a = builder.load(slot)
            builder.store(builder.add(builder.add(a, swapped), product), slot)
        builder.store(builder.load(slot), accp, align=8)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True)
def _long(acc, buf, at, n):  # pragma: no cover - compiled
    """Over 240 bytes; `acc` is 8 words of scratch."""
    acc[0], acc[1], acc[2], acc[3] = _P32_3, _P64_1, _P64_2, _P64_3
    acc[4], acc[5], acc[6], acc[7] = _P64_4, _P32_2, _P64_5, _P32_1
    blocks = (n - 1) // _BLOCK   # the last block (full or not) is left to the end
    for b in range(blocks):
        _accumulate(acc, buf, at + b * _BLOCK, SECRET, 0, _STRIPES_PER_BLOCK)
        for i in range(8):  # scramble with the secret's last 64 bytes (words 16..23)
            a = acc[i]
            acc[i] = ((a ^ (a >> _U(47))) ^ _SECRET_WORDS[16 + i]) * _P32_1
    _accumulate(acc, buf, at + blocks * _BLOCK, SECRET, 0, (n - blocks * _BLOCK - 1) // _STRIPE)
    _accumulate(acc, buf, at + n - _STRIPE, SECRET, _LAST_STRIPE_SECRET, 1)  # the last 64 bytes
    out = _U(n) * _P64_1
    for i in range(4):
        out += _fold128(acc[2 * i] ^ _load64(SECRET, _MERGE_SECRET + 16 * i),
                        acc[2 * i + 1] ^ _load64(SECRET, _MERGE_SECRET + 16 * i + 8))
    return _avalanche(out)


@numba.njit(cache=True)
def _hash(acc, buf, at, n):  # pragma: no cover - compiled
    if n <= 16:
        return _short(buf, at, n)
    if n <= 240:
        return _medium(buf, at, n)
    return _long(acc, buf, at, n)


@numba.njit(cache=True, nogil=True)
def hash_rows(flat, stride, row_bytes, out):  # pragma: no cover - compiled
    """out[i] = xxh3_64 of flat[i * stride: i * stride + row_bytes] for every i < len(out)
    (`flat`: the rows' bytes, C-contiguous uint8; the caller checks row_bytes <= stride and
    len(out) * stride <= len(flat))."""
    acc = np.empty(8, np.uint64)
    for i in range(out.shape[0]):
        out[i] = _hash(acc, flat, i * stride, row_bytes)


@numba.njit(cache=True, nogil=True)
def verify_rows(flat, stride, row_bytes, sums, rows_in_file, got):  # pragma: no cover - compiled
    """Hash every row as `hash_rows` (into `got`) and compare row i with sums[rows_in_file[i]];
    return the index of the first row that differs, or -1 (the caller checks rows_in_file's range)."""
    acc = np.empty(8, np.uint64)
    first = -1
    for i in range(got.shape[0]):
        h = _hash(acc, flat, i * stride, row_bytes)
        got[i] = h
        if first < 0 and h != sums[rows_in_file[i]]:
            first = i
    return first


def xxh3_64(data) -> int:
    """xxh3_64 of a bytes-like object (one value; tests and single rows)."""
    flat = np.frombuffer(bytes(data) + b"\0", np.uint8)  # one spare byte: a 0-byte input has an array
    out = np.empty(1, np.uint64)
    hash_rows(flat, flat.size, flat.size - 1, out)
    return int(out[0])
