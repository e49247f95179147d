#pragma once
// Batches over an ImageDataset: seeded per-epoch shuffling, augmentation, normalisation, and a
// background thread that prepares the next batches while the caller trains on the current one.
//
//   DataLoader loader(dataset, {.batch_size = 128, .seed = 7,
//                               .normalization = cifar10_normalization(),
//                               .augmentation = {.random_crop = true, .horizontal_flip = true}});
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.start_epoch(epoch);
//     while (std::optional<Batch> batch = loader.next()) { ... }
//   }
//
// Everything random is a function of (seed, epoch, sample index) only: the order of an epoch,
// each sample's crop and flip. Restarting a run at (epoch, batch) with start_epoch(epoch, batch)
// therefore reproduces exactly the batches the interrupted run would have seen.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/data/batch_buffer.h"
#include "runtime/data/dataset.h"
#include "runtime/data/sample_transform.h"

namespace sublet::data {

struct Batch {
  BatchBuffer images;                        // batch_size * C*H*W floats, NCHW
  std::vector<std::int64_t> labels;          // batch_size
  std::vector<std::int64_t> sample_indices;  // dataset index of each row (resume, debugging)
  std::int64_t batch_size = 0;               // rows; the last batch may be short unless drop_last
  std::int64_t channels = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t epoch = 0;
  std::int64_t index = 0;  // position of this batch within its epoch
};

struct LoaderOptions {
  std::int64_t batch_size = 64;
  bool shuffle = true;
  std::uint64_t seed = 0;
  bool drop_last = false;  // drop a final batch smaller than batch_size
  Normalization normalization{};
  Augmentation augmentation{};
  // Batches prepared ahead by the background thread (a bounded queue). 0 prepares each batch
  // inside next() on the calling thread: no thread at all, useful for debugging.
  std::int64_t prefetch_batches = 2;
  // Where batch images live; empty means allocate_host_batch_buffer.
  BatchBufferAllocator buffer_allocator{};
  // A sampler: the dataset indices of an epoch, in reading order, `indices_per_epoch` of them
  // every epoch (data parallel: this rank's shard, distributed/shard_sampler.h). Empty: the
  // whole dataset, shuffled by `seed` when `shuffle`.
  std::function<std::vector<std::int64_t>(std::int64_t epoch)> epoch_indices{};
  std::int64_t indices_per_epoch = 0;
};

// One consumer thread calls start_epoch and next; the loader's own thread only prepares batches.
class DataLoader {
 public:
  // Throws ValueError for batch_size <= 0, prefetch_batches outside [0, 16], or a
  // normalisation/augmentation that does not fit the dataset.
  DataLoader(std::shared_ptr<const ImageDataset> dataset, LoaderOptions options);
  // Stops the background thread even in the middle of an epoch; batches already handed out
  // stay valid.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  std::int64_t batches_per_epoch() const;
  // The dataset indices of `epoch` in the order they are served (identity when !shuffle).
  std::vector<std::int64_t> epoch_order(std::int64_t epoch) const;

  // Starts serving `epoch` from batch `first_batch` (0 for a fresh epoch, k to resume after k
  // batches). Abandons whatever remains of the previous epoch.
  void start_epoch(std::int64_t epoch, std::int64_t first_batch = 0);

  // The next batch of the current epoch, or nullopt once the epoch is exhausted. An exception
  // thrown while preparing a batch (in the background thread or here) is rethrown by the call
  // that would have returned that batch, and by every later call until start_epoch.
  std::optional<Batch> next();

  const ImageDataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

 private:
  Batch make_batch(std::int64_t batch_index) const;
  void produce(std::int64_t first_batch);
  void stop_worker();

  std::shared_ptr<const ImageDataset> dataset_;
  LoaderOptions options_;

  // The epoch being served; written only while no worker runs.
  std::int64_t epoch_ = -1;
  std::vector<std::int64_t> order_;
  std::int64_t next_batch_ = 0;  // used when prefetch_batches == 0

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  std::exception_ptr error_;
  bool producer_done_ = false;
  bool stop_requested_ = false;
  std::thread worker_;
};

}  // namespace sublet::data
