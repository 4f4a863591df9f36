pub mod cli;
pub mod format;
pub mod io;
pub mod mx;
