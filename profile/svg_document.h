#pragma once
// Just enough SVG to draw the profile's plots without a dependency: shapes, text (escaped) and a
// title on hover. Coordinates in pixels.
#include <string>
#include <utility>
#include <vector>

#include "profile/category_accounting.h"

namespace sublet::profile {

class SvgDocument {
 public:
  SvgDocument(double width, double height);
  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& title = "",
            const std::string& extra = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            const std::string& extra = "");
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke, double width = 1.5);
  void polygon(const std::vector<std::pair<double, double>>& points, const std::string& fill, const std::string& title = "");
  void circle(double x, double y, double r, const std::string& fill, const std::string& title = "");
  // anchor: "start", "middle" or "end"; rotate: degrees about (x, y).
  void text(double x, double y, const std::string& content, double size = 11, const std::string& anchor = "start",
            const std::string& extra = "", double rotate = 0);
  std::string str() const;

 private:
  double width_, height_;
  std::string body_;
};

std::string xml_escape(const std::string& text);
// One colour per category, shared by the plots (and the HTML legend).
const char* category_color(Category category);
// "12.5 MiB"-style tick labels and a "nice" axis maximum (1, 2 or 5 times a power of ten of MiB).
double nice_axis_max(double bytes);
std::string axis_label(double bytes);

}  // namespace sublet::profile
