#include "runtime/data/loader.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/errors.h"
#include "core/random.h"

namespace sublet::data {
namespace {

// Tag that keeps the augmentation streams of a seed apart from its order stream
// (kEpochOrderStream, random.h).
constexpr std::uint64_t kAugmentStream = 0x4155474d00000002ULL;
constexpr std::int64_t kMaxPrefetch = 16;

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const ImageDataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  if (!dataset_) throw ValueError("loader: dataset is null");
  dataset_->validate();
  if (options_.batch_size <= 0) {
    throw ValueError("loader: batch_size must be > 0, got " + std::to_string(options_.batch_size));
  }
  if (options_.prefetch_batches < 0 || options_.prefetch_batches > kMaxPrefetch) {
    throw ValueError("loader: prefetch_batches must be in [0, " + std::to_string(kMaxPrefetch) +
                     "], got " + std::to_string(options_.prefetch_batches));
  }
  check_sample_transform(*dataset_, options_.normalization, options_.augmentation);
  if (!options_.buffer_allocator) options_.buffer_allocator = allocate_host_batch_buffer;
}

DataLoader::~DataLoader() { stop_worker(); }

std::int64_t DataLoader::batches_per_epoch() const {
  const std::int64_t size = options_.epoch_indices ? options_.indices_per_epoch : dataset_->size();
  return options_.drop_last ? size / options_.batch_size
                            : (size + options_.batch_size - 1) / options_.batch_size;
}

std::vector<std::int64_t> DataLoader::epoch_order(std::int64_t epoch) const {
  if (options_.epoch_indices) {
    std::vector<std::int64_t> order = options_.epoch_indices(epoch);
    if (static_cast<std::int64_t>(order.size()) != options_.indices_per_epoch)
      throw ValueError("loader: the sampler gave " + std::to_string(order.size()) + " indices for epoch " +
                       std::to_string(epoch) + ", expected " + std::to_string(options_.indices_per_epoch));
    for (std::int64_t i : order)
      if (i < 0 || i >= dataset_->size())
        throw ValueError("loader: the sampler gave index " + std::to_string(i) + " for a dataset of " +
                         std::to_string(dataset_->size()) + " images");
    return order;
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_->size()));
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) {
    Random random(stream_key(options_.seed, kEpochOrderStream, static_cast<std::uint64_t>(epoch)));
    shuffle_in_place(order, random);
  }
  return order;
}

void DataLoader::start_epoch(std::int64_t epoch, std::int64_t first_batch) {
  if (epoch < 0) throw ValueError("loader: epoch must be >= 0, got " + std::to_string(epoch));
  if (first_batch < 0 || first_batch > batches_per_epoch()) {
    throw ValueError("loader: first_batch must be in [0, " + std::to_string(batches_per_epoch()) +
                     "], got " + std::to_string(first_batch));
  }
  stop_worker();
  epoch_ = epoch;
  order_ = epoch_order(epoch);
  next_batch_ = first_batch;
  error_ = nullptr;
  producer_done_ = false;
  stop_requested_ = false;
  ready_.clear();
  if (options_.prefetch_batches > 0) {
    worker_ = std::thread([this, first_batch] { produce(first_batch); });
  }
}

std::optional<Batch> DataLoader::next() {
  if (epoch_ < 0) throw ValueError("loader: call start_epoch(epoch) before next()");
  if (options_.prefetch_batches == 0) {
    if (error_) std::rethrow_exception(error_);
    if (next_batch_ >= batches_per_epoch()) return std::nullopt;
    try {
      return make_batch(next_batch_++);
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !ready_.empty() || error_ || producer_done_; });
  // Batches prepared before a failure are still served first, in order.
  if (!ready_.empty()) {
    Batch batch = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return batch;
  }
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

void DataLoader::produce(std::int64_t first_batch) {
  const std::int64_t end = batches_per_epoch();
  for (std::int64_t index = first_batch; index < end; ++index) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] {
        return stop_requested_ ||
               static_cast<std::int64_t>(ready_.size()) < options_.prefetch_batches;
      });
      if (stop_requested_) return;
    }
    // Prepared outside the lock: the consumer keeps taking ready batches meanwhile.
    std::optional<Batch> batch;
    try {
      batch = make_batch(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      producer_done_ = true;
      changed_.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.push_back(std::move(*batch));
    changed_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  producer_done_ = true;
  changed_.notify_all();
}

void DataLoader::stop_worker() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_requested_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

Batch DataLoader::make_batch(std::int64_t batch_index) const {
  const ImageDataset& dataset = *dataset_;
  const std::int64_t begin = batch_index * options_.batch_size;
  const std::int64_t rows = std::min(options_.batch_size, dataset.size() - begin);
  const std::int64_t numel = dataset.sample_numel();

  Batch batch;
  batch.batch_size = rows;
  batch.channels = dataset.channels;
  batch.height = dataset.height;
  batch.width = dataset.width;
  batch.epoch = epoch_;
  batch.index = batch_index;
  batch.images = options_.buffer_allocator(static_cast<std::size_t>(rows * numel));
  if (batch.images.size() < static_cast<std::size_t>(rows * numel) ||
      batch.images.data() == nullptr) {
    throw ValueError("loader: buffer allocator returned " + std::to_string(batch.images.size()) +
                     " floats, needed " + std::to_string(rows * numel));
  }
  batch.labels.reserve(static_cast<std::size_t>(rows));
  batch.sample_indices.reserve(static_cast<std::size_t>(rows));
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t sample = order_[static_cast<std::size_t>(begin + row)];
    batch.sample_indices.push_back(sample);
    batch.labels.push_back(dataset.labels[static_cast<std::size_t>(sample)]);
    const std::uint64_t key =
        stream_key(options_.seed ^ kAugmentStream, static_cast<std::uint64_t>(epoch_),
                   static_cast<std::uint64_t>(sample));
    write_transformed_sample(dataset, sample, options_.normalization, options_.augmentation, key,
                             batch.images.data() + row * numel);
  }
  return batch;
}

}  // namespace sublet::data
