// A violation for the standalone check's own test.
const char* kTraces = "../shared/traces/weka";
