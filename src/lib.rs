pub mod cli;
pub mod device;
pub mod format;
pub mod gemm;
pub mod io;
pub mod mx;
pub mod order;
pub mod rng;
