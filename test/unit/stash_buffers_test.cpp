// StashBuffers (tether/detail/core/call_table.hpp): the buffers of stashed payloads
// are reused, and what is kept stays bounded.
#include <catch2/catch.hpp>

#include <vector>

#include "tether/detail/core/call_table.hpp"

using tether::detail::core::StashBuffers;

TEST_CASE("an emptied stash buffer holds the next payload it is large enough for", "[unit][core]") {
  StashBuffers buffers;
  std::vector<unsigned char> a = buffers.take(512);
  REQUIRE(a.size() == 512);
  const unsigned char* memory = a.data();
  buffers.give(std::move(a));
  CHECK(buffers.keptBytes() >= 512);
  std::vector<unsigned char> b = buffers.take(100);  // smaller: the same memory
  CHECK(b.size() == 100);
  CHECK(b.data() == memory);
  CHECK(buffers.keptBytes() == 0);
  buffers.give(std::move(b));
  std::vector<unsigned char> c = buffers.take(4096);  // larger than any kept: a new one
  CHECK(c.data() != memory);
  CHECK(buffers.keptBytes() >= 512);
  CHECK(buffers.take(0).capacity() == 0);  // an empty payload takes nothing
}

TEST_CASE("stash buffers keep at most 1 MiB and 256 buffers, and none larger than 64 KiB", "[unit][core]") {
  StashBuffers buffers;
  buffers.give(std::vector<unsigned char>(StashBuffers::kMaxBytes + 1));
  CHECK(buffers.keptBytes() == 0);
  for (int i = 0; i < 100; ++i) buffers.give(std::vector<unsigned char>(StashBuffers::kMaxBytes));
  CHECK(buffers.keptBytes() <= StashBuffers::kKeptBytes);
  CHECK(buffers.keptBytes() >= StashBuffers::kKeptBytes - StashBuffers::kMaxBytes);
  for (int i = 0; i < 100; ++i) buffers.give(std::vector<unsigned char>(64));
  CHECK(buffers.keptBytes() <= StashBuffers::kKeptBytes);

  StashBuffers small;
  for (int i = 0; i < 1000; ++i) small.give(std::vector<unsigned char>(8));
  CHECK(small.keptBytes() == StashBuffers::kBuffers * 8);
}
