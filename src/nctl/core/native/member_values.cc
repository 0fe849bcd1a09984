// Every member's value in a layer's nodes, as an XLA FFI handler (docs/algorithm.md §6.2, §6.11): each
// member's value is its source's (a pool entry's, or the fresh model's), and a lane's where the member has
// one. The values are a layer's predictions or their log-likelihoods; XLA:CPU gathered them with the
// log-likelihood of the entry fused in, taking one logarithm per member instead of one per entry.

#include <algorithm>
#include <cstdint>

#include "kernel_common.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using nctl::NetAxis;
using nctl::Resolve;

// out[s, m, n] = entries[n, source[s, m, offset + n]] for m < k where that source is >= 0, else fresh;
// then out[s, member[s, n, w], n] = lanes[s, n, w] for each lane w with a member (>= 0). entries [nets?,
// N, E], fresh [nets?], source [nets?, S, k, columns], lanes and member [nets?, S, N, W], out [nets?, S, k
// + 1, N]. A source past the entries is clamped to the last, as XLA's gather clamps it.
template <ffi::DataType T>
ffi::Error MemberValues(ffi::Buffer<T> entries, ffi::Buffer<T> fresh, ffi::Buffer<ffi::S32> source,
                        ffi::Buffer<T> lanes, ffi::Buffer<ffi::S32> member, int64_t offset,
                        ffi::ResultBuffer<T> out) {
  using V = ffi::NativeType<T>;
  auto entry_dims = entries.dimensions(), source_dims = source.dimensions(), lane_dims = lanes.dimensions();
  if (entry_dims.size() < 2 || source_dims.size() < 3 || lane_dims.size() < 3)
    return ffi::Error::InvalidArgument("nctl member values: arguments of unexpected rank");
  const int64_t N = entry_dims[entry_dims.size() - 2], E = entry_dims.back();
  const int64_t S = source_dims[source_dims.size() - 3], k = source_dims[source_dims.size() - 2],
                columns = source_dims.back(), W = lane_dims.back(), M = k + 1;
  if (k > 0 && (offset < 0 || offset + N > columns || E == 0))  // no pool (k = 0): every member is fresh or a lane
    return ffi::Error::InvalidArgument("nctl member values: the layer's columns are not in the source");
  const int64_t nets = std::max({NetAxis(entries, 2), NetAxis(fresh, 0), NetAxis(source, 3), NetAxis(lanes, 3),
                                 NetAxis(member, 3)});
  const auto Entry = Resolve<V>(entries, 2, nets);
  const auto Fresh = Resolve<V>(fresh, 0, nets);
  const auto Source = Resolve<int32_t>(source, 3, nets);
  const auto Lane = Resolve<V>(lanes, 3, nets);
  const auto Member = Resolve<int32_t>(member, 3, nets);
  for (int64_t g = 0; g < nets; ++g) {
    const V* entry = Entry.at(g);
    const V fresh_value = *Fresh.at(g);
    V* values = out->typed_data() + g * S * M * N;
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t m = 0; m < k; ++m) {
        const int32_t* from = Source.at(g) + (s * k + m) * columns + offset;
        V* to = values + (s * M + m) * N;
        for (int64_t n = 0; n < N; ++n)
          to[n] = from[n] >= 0 ? entry[n * E + std::min<int64_t>(from[n], E - 1)] : fresh_value;
      }
      std::fill_n(values + (s * M + k) * N, N, fresh_value);
      for (int64_t n = 0; n < N; ++n) {
        const int32_t* lane_member = Member.at(g) + (s * N + n) * W;
        const V* lane = Lane.at(g) + (s * N + n) * W;
        for (int64_t w = 0; w < W; ++w)
          if (lane_member[w] >= 0 && lane_member[w] < M) values[(s * M + lane_member[w]) * N + n] = lane[w];
      }
    }
  }
  return ffi::Error::Success();
}

#define NCTL_MEMBER_VALUES(symbol, T)                                             \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(symbol, MemberValues<T>,                          \
                                ffi::Ffi::Bind()                                  \
                                    .Arg<ffi::Buffer<T>>()                        \
                                    .Arg<ffi::Buffer<T>>()                        \
                                    .Arg<ffi::Buffer<ffi::S32>>()                 \
                                    .Arg<ffi::Buffer<T>>()                        \
                                    .Arg<ffi::Buffer<ffi::S32>>()                 \
                                    .Attr<int64_t>("offset")                      \
                                    .Ret<ffi::Buffer<T>>())

NCTL_MEMBER_VALUES(NctlMemberValuesF32, ffi::F32);
NCTL_MEMBER_VALUES(NctlMemberValuesF64, ffi::F64);
