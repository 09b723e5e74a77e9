// Catch2's own main(), compiled once (what the CMake target Catch2::Catch2WithMain is).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
