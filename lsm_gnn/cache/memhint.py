"""A software prefetch for numba kernels: `prefetch_record(rows, i)` asks the CPU to start
loading row i of a 2-D array (one owner-local record) into the cache.

The hot loops know which records they will touch a few iterations ahead (the ids come from a
batch array) but the loads sit behind unpredictable branches; prefetching them overlaps the
memory latency. It changes no result. Uses LLVM's `llvm.prefetch` (read/write hint, high
locality) through numba's intrinsic API.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

PREFETCH_DISTANCE = 16  # iterations ahead: enough to cover a DRAM access at a few ns per iteration


@intrinsic
def prefetch_record(typingctx, rows, index):
    sig = types.void(rows, index)

    def codegen(context, builder, signature, args):
        ary, ind = args
        aryty = signature.args[0]
        array = context.make_array(aryty)(context, builder, ary)
        zero = context.get_constant(types.intp, 0)
        ind = context.cast(builder, ind, signature.args[1], types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, array, [ind, zero], wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        # (address, rw = 1 write, locality = 3 keep, cache type = 1 data)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 1), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
