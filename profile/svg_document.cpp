#include "profile/svg_document.h"

#include <fmt/format.h>

#include <cmath>

namespace sublet::profile {

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

SvgDocument::SvgDocument(double width, double height) : width_(width), height_(height) {}

void SvgDocument::rect(double x, double y, double w, double h, const std::string& fill, const std::string& title,
                       const std::string& extra) {
  body_ += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" {}", x, y,
                       std::max(0.0, w), std::max(0.0, h), fill, extra);
  body_ += title.empty() ? "/>\n" : fmt::format("><title>{}</title></rect>\n", xml_escape(title));
}

void SvgDocument::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
                       const std::string& extra) {
  body_ += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"{}\" {}/>\n",
                       x1, y1, x2, y2, stroke, width, extra);
}

void SvgDocument::polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke, double width) {
  body_ += "<polyline fill=\"none\" stroke=\"" + stroke + "\" stroke-width=\"" + fmt::format("{}", width) + "\" points=\"";
  for (const auto& [x, y] : points) body_ += fmt::format("{:.2f},{:.2f} ", x, y);
  body_ += "\"/>\n";
}

void SvgDocument::polygon(const std::vector<std::pair<double, double>>& points, const std::string& fill, const std::string& title) {
  body_ += "<polygon fill=\"" + fill + "\" stroke=\"none\" points=\"";
  for (const auto& [x, y] : points) body_ += fmt::format("{:.2f},{:.2f} ", x, y);
  body_ += title.empty() ? "\"/>\n" : "\"><title>" + xml_escape(title) + "</title></polygon>\n";
}

void SvgDocument::circle(double x, double y, double r, const std::string& fill, const std::string& title) {
  body_ += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{}\" fill=\"{}\" stroke=\"black\"", x, y, r, fill);
  body_ += title.empty() ? "/>\n" : fmt::format("><title>{}</title></circle>\n", xml_escape(title));
}

void SvgDocument::text(double x, double y, const std::string& content, double size, const std::string& anchor,
                       const std::string& extra, double rotate) {
  const std::string transform = rotate != 0 ? fmt::format(" transform=\"rotate({} {:.2f} {:.2f})\"", rotate, x, y) : "";
  body_ += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"{}\" text-anchor=\"{}\"{} {}>{}</text>\n", x, y, size,
                       anchor, transform, extra, xml_escape(content));
}

std::string SvgDocument::str() const {
  return fmt::format(
             "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" "
             "font-family=\"DejaVu Sans, Arial, sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
             width_, height_) +
         body_ + "</svg>\n";
}

const char* category_color(Category category) {
  switch (category) {
    case Category::Parameter: return "#4e79a7";
    case Category::Gradient: return "#f28e2b";
    case Category::Activation: return "#e15759";
    case Category::OptimizerState: return "#76b7b2";
    case Category::Workspace: return "#59a14f";
    case Category::Input: return "#edc948";
    case Category::Temporary: return "#b07aa1";
    case Category::Communication: return "#9c755f";
    case Category::Autocast: return "#ff9da7";
  }
  return "#999999";
}

double nice_axis_max(double bytes) {
  // Rounded in the unit the labels use (GiB from 1 GiB up), so that the five ticks read 1, 2, 3,
  // 4, 5 GiB rather than 0.98, 1.95, 2.93 GiB (a round number of MiB).
  const double unit = bytes >= 1024.0 * 1024.0 * 1024.0 ? 1024.0 * 1024.0 * 1024.0 : 1024.0 * 1024.0;
  const double value = std::max(bytes / unit, 1e-3);
  const double power = std::pow(10.0, std::floor(std::log10(value)));
  for (double step : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (step * power >= value) return step * power * unit;
  return 10 * power * unit;
}

namespace {

// 1000, 12.5, 0.25: never an exponent ("{:.3g}" printed 1000 MiB as "1e+03 MiB").
std::string plain_number(double value) {
  std::string text = fmt::format("{:.{}f}", value, value >= 100 ? 0 : value >= 10 ? 1 : 2);
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return text;
}

}  // namespace

std::string axis_label(double bytes) {
  const double mib = bytes / (1024.0 * 1024.0);
  if (mib >= 1024) return plain_number(mib / 1024.0) + " GiB";
  if (mib >= 1 || mib == 0) return plain_number(mib) + " MiB";
  return plain_number(mib * 1024.0) + " KiB";
}

}  // namespace sublet::profile
