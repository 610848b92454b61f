// kernalyse-tracegen --shapes DIR (shapes.cpp): traces with operator shapes and planted roofline
// classes and hints, for the performance model's truth test.
#pragma once

#include <string>

// Writes DIR/hints.json, DIR/clean.json and DIR/planted.json (iters iterations of each workload).
void write_shapes(const std::string& dir, int iters);
