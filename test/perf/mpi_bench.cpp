// mpi-bench: the same measurements as tether-bench, over MPI, for side-by-side figures.
//
//   mpirun -np 8 --mca btl self,tcp --mca btl_tcp_if_include lo mpi-bench --op allgather --bytes 64 --json
//
// Same options and output (bench_common.hpp); the rank count comes from
// MPI_COMM_WORLD (--nranks, when given, must match). init_ms is the slowest
// rank's MPI_Init; first_us the slowest rank's first call (MPI opens
// connections lazily there too).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_common.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using bench::Op;

double microsecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

std::vector<double> timeOp(Op op, std::size_t bytes, int count, int rank, int size) {
  const std::size_t n = static_cast<std::size_t>(size);
  const int b = static_cast<int>(bytes);
  std::vector<unsigned char> data(op == Op::Allgather || op == Op::Alltoall ? n * bytes : bytes, 1);
  std::vector<unsigned char> received(op == Op::Alltoall ? n * bytes : 0);
  // MPI wants non-null buffers even for zero bytes.
  if (data.empty()) data.resize(1);
  if (received.empty()) received.resize(1);
  std::vector<double> times(static_cast<std::size_t>(count), 0.0);
  const int pingTag = 1;
  for (int i = 0; i < count; ++i) {
    const auto start = Clock::now();
    switch (op) {
      case Op::Allgather:
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data.data(), b, MPI_BYTE, MPI_COMM_WORLD);
        break;
      case Op::Alltoall:
        MPI_Alltoall(data.data(), b, MPI_BYTE, received.data(), b, MPI_BYTE, MPI_COMM_WORLD);
        break;
      case Op::Barrier:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
      case Op::Broadcast:
        MPI_Bcast(data.data(), b, MPI_BYTE, 0, MPI_COMM_WORLD);
        break;
      case Op::Sendrecv:
      case Op::Pingpong:
        if (rank == 0) {
          MPI_Send(data.data(), b, MPI_BYTE, 1, pingTag, MPI_COMM_WORLD);
          MPI_Recv(data.data(), b, MPI_BYTE, 1, pingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
          MPI_Recv(data.data(), b, MPI_BYTE, 0, pingTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(data.data(), b, MPI_BYTE, 0, pingTag, MPI_COMM_WORLD);
        }
        break;
    }
    times[static_cast<std::size_t>(i)] = microsecondsSince(start);
    if (op == Op::Sendrecv) times[static_cast<std::size_t>(i)] /= 2;  // half round trip (pingpong: all of it)
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  const auto initStart = Clock::now();
  MPI_Init(&argc, &argv);
  const double initUs = microsecondsSince(initStart);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  bench::Options options;
  try {
    options = bench::parseOptions("mpi-bench", argc, argv);
    if (options.nranksGiven && options.nranks != size) {
      throw std::invalid_argument("--nranks " + std::to_string(options.nranks) + " but mpirun started " +
                                  std::to_string(size));
    }
    options.nranks = size;
    for (Op op : options.ops) {
      if (bench::isPingPong(op) && size < 2)
        throw std::invalid_argument(std::string(bench::opName(op)) + " needs at least 2 ranks");
    }
    for (std::size_t bytes : options.bytes) {
      if (bytes > static_cast<std::size_t>(1) << 30)
        throw std::invalid_argument("--bytes too large for MPI int counts");
    }
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "mpi-bench: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }

  for (Op op : options.ops) {
    for (std::size_t bytes : bench::sizesFor(op, options.bytes)) {
      std::vector<double> times = timeOp(op, bytes, options.warmup + options.iters, rank, size);
      std::vector<double> record{initUs, times.front()};
      record.insert(record.end(), times.end() - options.iters, times.end());
      std::vector<double> all(rank == 0 ? record.size() * static_cast<std::size_t>(size) : 0);
      MPI_Gather(record.data(), static_cast<int>(record.size()), MPI_DOUBLE, all.data(),
                 static_cast<int>(record.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (rank != 0) continue;

      bench::Result result;
      result.impl = "mpi";
      result.op = op;
      result.nranks = size;
      result.bytes = bytes;
      result.iters = options.iters;
      std::vector<std::vector<double>> perRank;
      for (int r = 0; r < size; ++r) {
        const double* theirs = all.data() + static_cast<std::size_t>(r) * record.size();
        result.initMs = std::max(result.initMs, theirs[0] / 1000.0);
        result.firstUs = std::max(result.firstUs, theirs[1]);
        perRank.emplace_back(theirs + 2, theirs + record.size());
      }
      if (bench::isPingPong(op)) perRank.resize(1);  // rank 0 timed the round trips
      bench::summarize(perRank, result);
      bench::print(result, options.json);
    }
  }
  MPI_Finalize();
  return 0;
}
