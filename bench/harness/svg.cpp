#include "svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "common.hpp"

namespace rcbench {

namespace {

std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '<') o += "&lt;";
        else if (c == '>') o += "&gt;";
        else if (c == '&') o += "&amp;";
        else o += c;
    }
    return o;
}
std::string num(double v) {
    char b[32];
    if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-2)) std::snprintf(b, sizeof b, "%.0e", v);
    else std::snprintf(b, sizeof b, "%g", v);
    return b;
}

}  // namespace

void write_svg_plot(const std::string& path, const PlotSpec& spec, const std::vector<Series>& series) {
    const double W = 820, H = 520, L = 80, R = 200, T = 40, B = 60;
    double x0 = std::numeric_limits<double>::max(), x1 = -x0, y0 = x0, y1 = -x0;
    for (const auto& s : series)
        for (auto [x, y] : s.points) {
            if ((spec.logx && x <= 0) || (spec.logy && y <= 0)) continue;
            x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
        }
    if (x0 > x1) x0 = 1, x1 = 10, y0 = 1, y1 = 10;
    if (spec.y_from_zero && !spec.logy) y0 = 0;
    const auto tr = [](bool lg, double v) { return lg ? std::log10(v) : v; };
    double tx0 = tr(spec.logx, x0), tx1 = tr(spec.logx, x1), ty0 = tr(spec.logy, y0), ty1 = tr(spec.logy, y1);
    if (spec.logx) tx0 = std::floor(tx0), tx1 = std::ceil(tx1);
    if (spec.logy) ty0 = std::floor(ty0), ty1 = std::ceil(ty1);
    if (tx1 <= tx0) tx1 = tx0 + 1;
    if (ty1 <= ty0) ty1 = ty0 + 1;
    const auto px = [&](double x) { return L + (tr(spec.logx, x) - tx0) / (tx1 - tx0) * (W - L - R); };
    const auto py = [&](double y) { return H - B - (tr(spec.logy, y) - ty0) / (ty1 - ty0) * (H - T - B); };

    std::ostringstream o;
    o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
      << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
    o << "<text x='" << W / 2 << "' y='22' text-anchor='middle' font-size='15'>" << esc(spec.title) << "</text>\n";
    // Grid and ticks: decades on log axes, 5 steps on linear ones.
    const auto ticks = [](bool lg, double a, double b) {
        std::vector<double> t;
        if (lg)
            for (double e = a; e <= b + 1e-9; e += 1) t.push_back(std::pow(10.0, e));
        else
            for (int i = 0; i <= 5; ++i) t.push_back(a + (b - a) * i / 5);
        return t;
    };
    for (double x : ticks(spec.logx, tx0, tx1)) {
        o << "<line x1='" << px(x) << "' y1='" << T << "' x2='" << px(x) << "' y2='" << H - B
          << "' stroke='#ddd'/><text x='" << px(x) << "' y='" << H - B + 18 << "' text-anchor='middle'>" << num(x)
          << "</text>\n";
    }
    for (double y : ticks(spec.logy, ty0, ty1)) {
        o << "<line x1='" << L << "' y1='" << py(y) << "' x2='" << W - R << "' y2='" << py(y)
          << "' stroke='#ddd'/><text x='" << L - 6 << "' y='" << py(y) + 4 << "' text-anchor='end'>" << num(y)
          << "</text>\n";
    }
    o << "<rect x='" << L << "' y='" << T << "' width='" << W - L - R << "' height='" << H - T - B
      << "' fill='none' stroke='black'/>\n";
    o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 15 << "' text-anchor='middle'>" << esc(spec.xlabel)
      << "</text>\n";
    o << "<text transform='translate(18," << (T + H - B) / 2 << ") rotate(-90)' text-anchor='middle'>"
      << esc(spec.ylabel) << "</text>\n";
    static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    int i = 0;
    for (const auto& s : series) {
        const char* c = colors[i % 10];
        o << "<polyline fill='none' stroke='" << c << "' stroke-width='2'" << (s.dashed ? " stroke-dasharray='6,4'" : "")
          << " points='";
        for (auto [x, y] : s.points) {
            if ((spec.logx && x <= 0) || (spec.logy && y <= 0)) continue;
            o << px(x) << ',' << py(y) << ' ';
        }
        o << "'/>\n";
        const double ly = T + 10 + 18 * i;
        o << "<line x1='" << W - R + 10 << "' y1='" << ly << "' x2='" << W - R + 40 << "' y2='" << ly << "' stroke='" << c
          << "' stroke-width='2'" << (s.dashed ? " stroke-dasharray='6,4'" : "") << "/><text x='" << W - R + 46
          << "' y='" << ly + 4 << "'>" << esc(s.name) << "</text>\n";
        ++i;
    }
    o << "</svg>\n";
    std::ofstream f(path);
    f << o.str();
    if (!f) throw BenchError("cannot write " + path);
}

}  // namespace rcbench
