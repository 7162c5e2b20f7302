//! Checks whose figures hang on the machine's timing (a log's think times and sessions at
//! once, recovered by `infer` and held to the log by `fidelity`), in a binary of their
//! own whose tests run one at a time: cargo runs test binaries one after another, so
//! nothing else of the suite loads the cores beside them.

#[allow(dead_code, unused_imports)]
#[path = "../it/common.rs"]
mod common;
#[path = "../it/infer.rs"]
mod infer;
