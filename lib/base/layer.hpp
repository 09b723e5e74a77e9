// Layering guard. Every header in lib/ names its layer:
//   TETHER_LAYER(level, "name");
// and each layer's static library is compiled with -DTETHER_LAYER_LEVEL=<its
// level>, so a header of a higher layer included from a lower one fails to
// compile. Levels (lowest first, docs/design.md): base 0, wire 1, match 2,
// link 3, rendezvous 4, coll 5, core 6, rdma 7, capi 8. Tests and tools see
// every layer.
#pragma once

#ifndef TETHER_LAYER_LEVEL
#define TETHER_LAYER_LEVEL 1000
#endif

#define TETHER_LAYER(level, name)                                                        \
  static_assert(TETHER_LAYER_LEVEL >= (level), "upward include: the " name               \
                                               " layer's "                               \
                                               "headers are above this library's layer " \
                                               "(docs/design.md, Layers)")
