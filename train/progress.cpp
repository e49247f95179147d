#include "train/progress.h"

#include <fmt/format.h>

#include "core/format_bytes.h"

namespace sublet::train {
namespace {

std::string progress_text(const StepProgress& p) {
  using sublet::format_bytes;
  if (p.language_model) {
    return fmt::format("step {}/{} loss {:.4f} | {:.0f} tok/s | allocated {} (peak {}) | reserved {} (peak {})", p.step,
                       p.steps, p.mean_loss, p.tokens_per_s, format_bytes(static_cast<std::int64_t>(p.allocated_bytes)),
                       format_bytes(static_cast<std::int64_t>(p.peak_allocated_bytes)),
                       format_bytes(static_cast<std::int64_t>(p.reserved_bytes)),
                       format_bytes(static_cast<std::int64_t>(p.peak_reserved_bytes)));
  }
  return fmt::format("epoch {}/{} [{}/{}] loss {:.4f} | {:.0f} img/s | allocated {} (peak {}) | reserved {} (peak {})",
                     p.epoch, p.epochs, p.batches_done, p.batches_total, p.mean_loss, p.img_per_s,
                     format_bytes(static_cast<std::int64_t>(p.allocated_bytes)),
                     format_bytes(static_cast<std::int64_t>(p.peak_allocated_bytes)),
                     format_bytes(static_cast<std::int64_t>(p.reserved_bytes)),
                     format_bytes(static_cast<std::int64_t>(p.peak_reserved_bytes)));
}

}  // namespace

ProgressPrinter::ProgressPrinter(std::FILE* out, bool interactive) : out_(out), interactive_(interactive) {}

void ProgressPrinter::step_finished(const StepProgress& p) {
  const bool last = p.batches_done >= p.batches_total;
  if (interactive_) {
    const auto now = std::chrono::steady_clock::now();
    if (!last && line_open_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    // Clear to the end of the line: the new text may be shorter than the old one.
    fmt::print(out_, "\r{}\x1b[K", progress_text(p));
    line_open_ = true;
  } else {
    const std::int64_t tenth = p.batches_total > 0 ? p.batches_done * 10 / p.batches_total : 10;
    if (p.batches_done == 1) last_printed_tenth_ = -1;  // a new epoch
    if (tenth == last_printed_tenth_) return;
    last_printed_tenth_ = tenth;
    fmt::print(out_, "{}\n", progress_text(p));
  }
  std::fflush(out_);
}

void ProgressPrinter::epoch_finished(const EpochMetrics& m, std::int64_t epochs) {
  end_open_line();
  using sublet::format_bytes;
  if (m.language_model) {
    fmt::print(out_,
               "step {}: train loss {:.4f}, val loss {:.4f}, val perplexity {:.2f}, {:.0f} tok/s, peak allocated {}, "
               "peak reserved {} ({:.1f} s)\n",
               m.step, m.train_loss, m.val_loss, m.val_perplexity, m.tokens_per_s,
               format_bytes(static_cast<std::int64_t>(m.peak_allocated_bytes)),
               format_bytes(static_cast<std::int64_t>(m.peak_reserved_bytes)), m.seconds);
    std::fflush(out_);
    return;
  }
  fmt::print(out_,
             "epoch {}/{}: train loss {:.4f}, train acc {:.2f}%, test acc {:.2f}%, {:.0f} img/s, peak allocated {}, "
             "peak reserved {} ({:.1f} s)\n",
             m.epoch, epochs, m.train_loss, 100.0 * m.train_acc, 100.0 * m.test_acc, m.img_per_s,
             format_bytes(static_cast<std::int64_t>(m.peak_allocated_bytes)),
             format_bytes(static_cast<std::int64_t>(m.peak_reserved_bytes)), m.seconds);
  std::fflush(out_);
}

void ProgressPrinter::note(const std::string& message) {
  end_open_line();
  fmt::print(out_, "{}\n", message);
  std::fflush(out_);
}

void ProgressPrinter::end_open_line() {
  if (!line_open_) return;
  fmt::print(out_, "\n");
  line_open_ = false;
}

}  // namespace sublet::train
