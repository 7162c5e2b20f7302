pub fn main(_a: std::env::ArgsOs) -> i32 { 0 }
