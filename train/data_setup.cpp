#include "train/data_setup.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/errors.h"
#include "runtime/data/cifar10.h"
#include "runtime/data/mnist.h"
#include "runtime/data/synthetic.h"

namespace sublet::train {
namespace {

namespace fs = std::filesystem;

bool mnist_present(const fs::path& dir) {
  for (const char* base : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                           "t10k-labels-idx1-ubyte"}) {
    if (!fs::exists(dir / base) && !fs::exists(dir / (std::string(base) + ".gz"))) return false;
  }
  return true;
}

// MNIST and Fashion-MNIST share the IDX layout and the reader; they differ in where the files come
// from, their pixel statistics and the augmentation that suits them.
struct IdxDataset {
  const char* display_name;
  const char* how_to_get;
  data::Normalization normalization;
  data::Augmentation augmentation;
};

IdxDataset mnist_description() {
  // Shifts of up to 2 pixels (no flips: a mirrored digit is another symbol) are the usual MNIST
  // augmentation; with 8,000 training digits they are worth a few tenths of a percent.
  return {"MNIST", "run scripts/fetch_mnist.sh to download it", data::mnist_normalization(),
          {.random_crop = true, .crop_padding = 2, .horizontal_flip = false}};
}

IdxDataset fashion_mnist_description() {
  // Clothes stay clothes when mirrored, so flips join the shifts (as in the dataset's own baselines).
  return {"Fashion-MNIST", "install Debian's dataset-fashion-mnist package (apt-get install dataset-fashion-mnist)",
          data::fashion_mnist_normalization(), {.random_crop = true, .crop_padding = 2, .horizontal_flip = true}};
}

TrainingData load_idx_data(const TrainOptions& options, const fs::path& dir, const IdxDataset& dataset,
                           const std::string& name) {
  // Checked up front so that a fresh clone gets one actionable line instead of the reader's
  // message about a single file.
  if (!mnist_present(dir)) {
    throw IoError(std::string(dataset.display_name) + " not found in '" + dir.string() +
                  "' (expected train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                  "t10k-labels-idx1-ubyte, plain or .gz): " + dataset.how_to_get + ", or pass --data-dir DIR");
  }
  TrainingData out;
  data::ImageDataset train = take_first(data::load_mnist(dir, data::MnistSplit::train), options.limit_train);
  data::ImageDataset test = take_first(data::load_mnist(dir, data::MnistSplit::test), options.limit_test);
  train.name = name + "-train";
  test.name = name + "-test";
  out.train = std::make_shared<data::ImageDataset>(std::move(train));
  out.test = std::make_shared<data::ImageDataset>(std::move(test));
  out.normalization = dataset.normalization;
  out.augmentation = dataset.augmentation;
  return out;
}

TrainingData load_cifar10_data(const TrainOptions& options, const fs::path& dir) {
  if (!fs::exists(dir / "data_batch_1.bin") || !fs::exists(dir / "test_batch.bin")) {
    throw IoError("CIFAR-10 not found in '" + dir.string() +
                  "' (expected data_batch_1.bin ... data_batch_5.bin and test_batch.bin): download "
                  "cifar-10-binary.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html, extract it so that "
                  "those files are in that folder, or pass --data-dir DIR");
  }
  TrainingData out;
  out.train = std::make_shared<data::ImageDataset>(
      take_first(data::load_cifar10(dir, data::Cifar10Split::train), options.limit_train));
  out.test = std::make_shared<data::ImageDataset>(
      take_first(data::load_cifar10(dir, data::Cifar10Split::test), options.limit_test));
  out.normalization = data::cifar10_normalization();
  out.augmentation = {.random_crop = true, .crop_padding = 4, .horizontal_flip = true};
  return out;
}

// The synthetic images are generated up front in host memory: a typo in --synthetic-shape
// (3x3232x3232) would otherwise end in std::bad_alloc or the kernel's out-of-memory killer.
void check_synthetic_fits_host_memory(const TrainOptions& options, std::int64_t train_size, std::int64_t test_size) {
  const long double bytes = static_cast<long double>(train_size + test_size) * options.synthetic_channels *
                            options.synthetic_height * options.synthetic_width;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return;  // unknown: let the allocation decide
  const long double host_bytes = static_cast<long double>(pages) * page_size;
  // Half the machine: the images are also normalised into float batches and a model runs beside them.
  if (bytes <= host_bytes / 2) return;
  const auto gib = [](long double b) {
    return fmt::format("{:.2f} GiB", static_cast<double>(b / (1024.0L * 1024 * 1024)));
  };
  throw ValueError(fmt::format(
      "--synthetic-shape {}x{}x{}: {} + {} synthetic images need {} of host memory, more than half of this "
      "machine's {}; use a smaller shape or --limit-train/--limit-test",
      options.synthetic_channels, options.synthetic_height, options.synthetic_width, train_size, test_size, gib(bytes),
      gib(host_bytes)));
}

TrainingData make_synthetic_data(const TrainOptions& options) {
  check_synthetic_fits_host_memory(options,
                                   options.limit_train > 0 ? options.limit_train : options.synthetic_train_size,
                                   options.limit_test > 0 ? options.limit_test : options.synthetic_test_size);
  data::SyntheticOptions synthetic;
  synthetic.channels = options.synthetic_channels;
  synthetic.height = options.synthetic_height;
  synthetic.width = options.synthetic_width;
  synthetic.num_classes = 10;
  synthetic.task_seed = 0;  // one task for every run, so that accuracies compare across seeds
  synthetic.size = options.limit_train > 0 ? options.limit_train : options.synthetic_train_size;
  synthetic.sample_seed = 1;
  synthetic.name = "synthetic-train";
  TrainingData out;
  auto train = std::make_shared<data::ImageDataset>(data::make_synthetic_dataset(synthetic));
  synthetic.size = options.limit_test > 0 ? options.limit_test : options.synthetic_test_size;
  synthetic.sample_seed = 2;
  synthetic.name = "synthetic-test";
  out.test = std::make_shared<data::ImageDataset>(data::make_synthetic_dataset(synthetic));
  out.normalization = channel_statistics(*train);
  out.train = std::move(train);
  return out;
}

std::string shape_text(const data::ImageDataset& d) { return fmt::format("{}x{}x{}", d.channels, d.height, d.width); }

// Files that each read fine can still not belong together: an empty split would end in a
// schedule error or a 0% accuracy of nothing, a test split of another image size in a
// meaningless accuracy.
void check_splits(const TrainingData& data, const std::string& name, const fs::path& dir) {
  const std::string where = dir.empty() ? name : name + " in '" + dir.string() + "'";
  for (const auto* split : {data.train.get(), data.test.get()}) {
    if (split->size() == 0) {
      throw IoError(fmt::format("{}: the {} split has 0 images; expected at least 1", where,
                                split == data.train.get() ? "training" : "test"));
    }
  }
  if (shape_text(*data.train) != shape_text(*data.test)) {
    throw IoError(fmt::format("{}: the test images are {}, the training images {}; expected one image size for both",
                              where, shape_text(*data.test), shape_text(*data.train)));
  }
}

}  // namespace

data::ImageDataset take_first(data::ImageDataset dataset, std::int64_t limit) {
  if (limit <= 0 || limit >= dataset.size()) return dataset;
  dataset.labels.resize(static_cast<std::size_t>(limit));
  dataset.pixels.resize(static_cast<std::size_t>(limit * dataset.sample_numel()));
  dataset.validate();
  return dataset;
}

data::Normalization channel_statistics(const data::ImageDataset& dataset) {
  const std::int64_t plane = dataset.height * dataset.width;
  std::vector<double> sum(static_cast<std::size_t>(dataset.channels), 0.0);
  std::vector<double> sum_sq(sum.size(), 0.0);
  for (std::int64_t i = 0; i < dataset.size(); ++i) {
    const auto pixels = dataset.sample_pixels(i);
    for (std::int64_t c = 0; c < dataset.channels; ++c) {
      for (std::int64_t p = 0; p < plane; ++p) {
        const double v = pixels[static_cast<std::size_t>(c * plane + p)] / 255.0;
        sum[static_cast<std::size_t>(c)] += v;
        sum_sq[static_cast<std::size_t>(c)] += v * v;
      }
    }
  }
  data::Normalization out;
  const double count = static_cast<double>(dataset.size() * plane);
  for (std::size_t c = 0; c < sum.size(); ++c) {
    const double mean = count > 0 ? sum[c] / count : 0.0;
    const double variance = count > 0 ? std::max(sum_sq[c] / count - mean * mean, 0.0) : 0.0;
    out.mean.push_back(static_cast<float>(mean));
    // A constant channel would divide by zero; 1 leaves it merely centred.
    out.stddev.push_back(variance > 1e-12 ? static_cast<float>(std::sqrt(variance)) : 1.0f);
  }
  return out;
}

TrainingData load_training_data(const TrainOptions& options) {
  const fs::path dir = options.data_dir.empty() ? default_data_dir(options.data) : options.data_dir;
  TrainingData data;
  if (options.data == "text" || options.data == "tokens") {
    data.tokens = std::make_shared<const data::TokenDataset>(data::load_gpt_dataset(
        options.data, options.data_dir, data::TokenDataOptions().validation_fraction(options.validation_fraction)));
    return data;
  }
  if (options.data == "mnist") data = load_idx_data(options, dir, mnist_description(), "mnist");
  else if (options.data == "fashion-mnist") data = load_idx_data(options, dir, fashion_mnist_description(), "fashion-mnist");
  else if (options.data == "cifar10") data = load_cifar10_data(options, dir);
  else if (options.data == "synthetic") data = make_synthetic_data(options);
  else throw ValueError("--data: unknown value '" + options.data + "'; expected one of mnist, fashion-mnist, cifar10, synthetic, text, tokens");
  check_splits(data, options.data, dir);
  return data;
}

}  // namespace sublet::train
