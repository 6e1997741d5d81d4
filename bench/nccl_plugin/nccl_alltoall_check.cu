// nccl_alltoall_check: one rank of an NCCL all-to-all (grouped ncclSend/ncclRecv,
// the pattern PyTorch's all_to_all uses) for bench/device/nccl_plugin.sh. Every
// rank runs as its own process on GPU 0; the script gives each a distinct
// NCCL_HOSTID so NCCL sees separate hosts and moves the bytes through the net
// plugin (ours, or NCCL's built-in Socket). Rank 0 publishes the unique id in a
// file. Checks every element received, then times --iters all-to-alls and rank 0
// prints one JSON line. Single host thread per process.
//
// usage: nccl_alltoall_check <rank> <world> <id file> [bytes per peer] [iters]
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CUDA_OK(x)                                                                   \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                  \
    }                                                                                \
  } while (0)
#define NCCL_OK(x)                                                                   \
  do {                                                                               \
    ncclResult_t r_ = (x);                                                           \
    if (r_ != ncclSuccess) {                                                         \
      std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, #x, ncclGetErrorString(r_)); \
      std::exit(3);                                                                  \
    }                                                                                \
  } while (0)

static int g_rank = -1;

// Element k of the block rank `src` sends to rank `dst`.
__host__ __device__ inline uint32_t Value(int src, int dst, size_t k) {
  return static_cast<uint32_t>(src) * 2654435761u ^ static_cast<uint32_t>(dst) * 40503u ^
         static_cast<uint32_t>(k * 2246822519u);
}

__global__ void FillKernel(uint32_t* buf, int me, int world, size_t count) {
  size_t n = count * world;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    buf[i] = Value(me, static_cast<int>(i / count), i % count);
  }
}

__global__ void CheckKernel(const uint32_t* buf, int me, int world, size_t count,
                            unsigned long long* errors) {
  size_t n = count * world;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (buf[i] != Value(static_cast<int>(i / count), me, i % count)) atomicAdd(errors, 1ull);
  }
}

static void AllToAll(const uint32_t* send, uint32_t* recv, size_t count, int world, ncclComm_t comm,
                     cudaStream_t s) {
  NCCL_OK(ncclGroupStart());
  for (int p = 0; p < world; ++p) {
    NCCL_OK(ncclSend(send + p * count, count, ncclUint32, p, comm, s));
    NCCL_OK(ncclRecv(recv + p * count, count, ncclUint32, p, comm, s));
  }
  NCCL_OK(ncclGroupEnd());
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s rank world idfile [bytes_per_peer] [iters]\n", argv[0]);
    return 64;
  }
  g_rank = std::atoi(argv[1]);
  const int world = std::atoi(argv[2]);
  const std::string id_file = argv[3];
  const size_t bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : (8u << 20);
  const int iters = argc > 5 ? std::atoi(argv[5]) : 10;
  const size_t count = bytes / sizeof(uint32_t);

  ncclUniqueId id;
  if (g_rank == 0) {
    NCCL_OK(ncclGetUniqueId(&id));
    const std::string tmp = id_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr || std::fwrite(&id, sizeof(id), 1, f) != 1) return 4;
    std::fclose(f);
    std::rename(tmp.c_str(), id_file.c_str());
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (true) {
      FILE* f = std::fopen(id_file.c_str(), "rb");
      if (f != nullptr) {
        size_t got = std::fread(&id, sizeof(id), 1, f);
        std::fclose(f);
        if (got == 1) break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "rank %d: no unique id in %s\n", g_rank, id_file.c_str());
        return 5;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  CUDA_OK(cudaSetDevice(0));
  ncclComm_t comm;
  NCCL_OK(ncclCommInitRank(&comm, world, id, g_rank));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  uint32_t *send = nullptr, *recv = nullptr;
  unsigned long long* errors = nullptr;
  CUDA_OK(cudaMalloc(&send, count * world * sizeof(uint32_t)));
  CUDA_OK(cudaMalloc(&recv, count * world * sizeof(uint32_t)));
  CUDA_OK(cudaMalloc(&errors, sizeof(*errors)));
  CUDA_OK(cudaMemset(errors, 0, sizeof(*errors)));
  CUDA_OK(cudaMemset(recv, 0xEE, count * world * sizeof(uint32_t)));
  FillKernel<<<256, 256, 0, stream>>>(send, g_rank, world, count);
  CUDA_OK(cudaGetLastError());

  // Correctness first, then warm-up and timing.
  AllToAll(send, recv, count, world, comm, stream);
  CheckKernel<<<256, 256, 0, stream>>>(recv, g_rank, world, count, errors);
  unsigned long long bad = 0;
  CUDA_OK(cudaMemcpyAsync(&bad, errors, sizeof(bad), cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  AllToAll(send, recv, count, world, comm, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) AllToAll(send, recv, count, world, comm, stream);
  CUDA_OK(cudaStreamSynchronize(stream));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;

  // Every rank reports its errors on stderr; rank 0 prints the figures.
  if (bad != 0) std::fprintf(stderr, "rank %d: %llu wrong elements\n", g_rank, bad);
  if (g_rank == 0) {
    // algbw: bytes each rank sends to others per second; busbw as nccl-tests.
    const double moved = static_cast<double>(bytes) * (world - 1);
    std::printf(
        "{\"ranks\":%d,\"bytes_per_peer\":%zu,\"iters\":%d,\"seconds_per_alltoall\":%.6f,"
        "\"algbw_gbytes_per_s\":%.4f,\"busbw_gbytes_per_s\":%.4f,\"wrong_elements\":%llu}\n",
        world, bytes, iters, secs, static_cast<double>(bytes) * world / secs / 1e9,
        moved / secs / 1e9, bad);
  }
  NCCL_OK(ncclCommDestroy(comm));
  cudaFree(send);
  cudaFree(recv);
  cudaFree(errors);
  return bad == 0 ? 0 : 1;
}
