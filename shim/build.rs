// The same exports as liblocksuit_cov.so's: one script for both.
include!("../cov-stub/build.rs");
