// The block arenas' free stacks (docs/algorithm.md §6.2, §6.11), as an XLA FFI handler
// (nctl_free_blocks): the blocks of the slots that close pushed back onto their layer's stack in one
// pass over the slots' block tables, where XLA runs, per slot, a loop of gathers, a running count and
// a scatter; and the table of the slot pushed in their place emptied in the same call, which lets XLA
// update the tables in place (where the emptying was XLA's, it copied the tables twice around it).

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernel_common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using nctl::NetAxis;
using nctl::Resolve;
using Ids = ffi::Buffer<ffi::S32>;

// For each network, slots p = first .. stop - 1 in order, and in each the layer's neurons
// (block_of columns offset .. offset + neurons - 1) and contexts in order: every block id >= 0 is
// pushed onto `free` ([nets?, A], the layer's stack) at n_free[layer] ([nets?, L]), which counts it
// (a push past the stack's end is dropped, as XLA's scatter drops it). block_of: [nets?, S, columns, C].
// Where `clear`, then every column of slot `first` (the slot pushed next) is set to -1 (none).
ffi::Error FreeBlocks(Ids block_of, Ids free, Ids n_free, Ids first, Ids stop, int64_t layer, int64_t offset,
                      int64_t neurons, bool clear, ffi::ResultBuffer<ffi::S32> block_of_out,
                      ffi::ResultBuffer<ffi::S32> free_out, ffi::ResultBuffer<ffi::S32> n_free_out) {
  auto table = block_of.dimensions();
  if (table.size() < 3 || free.dimensions().size() < 1 || n_free.dimensions().size() < 1)
    return ffi::Error::InvalidArgument("nctl free blocks: arguments of unexpected rank");
  const int64_t S = table[table.size() - 3], columns = table[table.size() - 2], C = table.back();
  const int64_t A = free.dimensions().back(), L = n_free.dimensions().back();
  if (layer < 0 || layer >= L || offset < 0 || offset + neurons > columns)
    return ffi::Error::InvalidArgument("nctl free blocks: layer outside the block table");
  const int64_t nets = std::max({NetAxis(block_of, 3), NetAxis(free, 1), NetAxis(n_free, 1), NetAxis(first, 0),
                                 NetAxis(stop, 0)});
  const auto Table = Resolve<int32_t>(block_of, 3, nets);
  const auto Stack = Resolve<int32_t>(free, 1, nets);
  const auto Counts = Resolve<int32_t>(n_free, 1, nets);
  const auto First = Resolve<int32_t>(first, 0, nets);
  const auto Stop = Resolve<int32_t>(stop, 0, nets);
  auto* table_out = block_of_out->typed_data();
  auto* stack = free_out->typed_data();
  auto* counts = n_free_out->typed_data();
  for (int64_t g = 0; g < nets; ++g) {  // the outputs start as the inputs (the same buffers where aliased)
    int32_t* own_table = table_out + g * S * columns * C;
    if (own_table != Table.at(g)) std::memcpy(own_table, Table.at(g), S * columns * C * sizeof(int32_t));
    int32_t* own_stack = stack + g * A;
    int32_t* own_counts = counts + g * L;
    if (own_stack != Stack.at(g)) std::memcpy(own_stack, Stack.at(g), A * sizeof(int32_t));
    if (own_counts != Counts.at(g)) std::memcpy(own_counts, Counts.at(g), L * sizeof(int32_t));
    const int64_t from = std::max<int64_t>(*First.at(g), 0);
    const int64_t to = std::min<int64_t>(*Stop.at(g), S);
    int64_t top = own_counts[layer];
    for (int64_t p = from; p < to; ++p) {
      const int32_t* row = own_table + (p * columns + offset) * C;
      for (int64_t i = 0; i < neurons * C; ++i) {
        if (row[i] < 0) continue;
        if (top >= 0 && top < A) own_stack[top] = row[i];
        ++top;
      }
    }
    own_counts[layer] = static_cast<int32_t>(top);
    const int64_t pushed = *First.at(g);
    if (clear && pushed >= 0 && pushed < S) std::fill_n(own_table + pushed * columns * C, columns * C, -1);
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(NctlFreeBlocks, FreeBlocks,
                              ffi::Ffi::Bind()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Arg<Ids>()
                                  .Attr<int64_t>("layer")
                                  .Attr<int64_t>("offset")
                                  .Attr<int64_t>("neurons")
                                  .Attr<bool>("clear")
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());
