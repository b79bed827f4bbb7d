// A minimal SVG line plot (log or linear axes), so the report needs no plotting package on any
// machine (the 16-core machine has no apt).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rcbench {

struct Series {
    std::string name;
    std::vector<std::pair<double, double>> points;  // (x, y), x ascending
    bool dashed = false;
};

struct PlotSpec {
    std::string title, xlabel, ylabel;
    bool logx = false, logy = false;
    bool y_from_zero = false;  // linear y starts at 0
};

// Writes the plot; throws BenchError when the file cannot be written.
void write_svg_plot(const std::string& path, const PlotSpec& spec, const std::vector<Series>& series);

}  // namespace rcbench
