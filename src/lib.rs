pub mod cli;
pub mod format;
pub mod gemm;
pub mod io;
pub mod mx;
pub mod order;
