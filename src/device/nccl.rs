//! Several GPUs of one host driven from one process, with NCCL
//! communicators from `ncclCommInitAll` (feature `nccl`). Collectives are
//! issued for all ranks inside one NCCL group, then every stream is
//! synchronised. NVLink multicast (NVLS) must stay off
//! (`NCCL_NVLS_ENABLE=0`): `Ranks::open` refuses to start otherwise.

use super::gpu::{check_libraries, driver_err, Gpu};
use super::{DeviceError, Result};
use cudarc::nccl::{result as nccl, Comm, ReduceOp};

/// One GPU per rank and the communicators joining them.
pub struct Ranks {
    pub gpus: Vec<Gpu>,
    comms: Vec<Comm>,
}

fn nccl_err<E: std::fmt::Debug>(what: &str) -> impl FnOnce(E) -> DeviceError + '_ {
    move |e| DeviceError::Library {
        library: "NCCL",
        what: format!("{what}: {e:?}"),
    }
}

/// NCCL's version code (e.g. 22703 for 2.27.3).
pub fn nccl_version() -> Result<i32> {
    let mut v = 0i32;
    // SAFETY: out-parameter query on the loaded library.
    let rc = unsafe { cudarc::nccl::sys::ncclGetVersion(&mut v) };
    if rc != cudarc::nccl::sys::ncclResult_t::ncclSuccess {
        return Err(DeviceError::Library {
            library: "NCCL",
            what: format!("ncclGetVersion: {rc:?}"),
        });
    }
    Ok(v)
}

impl Ranks {
    /// Opens GPUs 0..world and one communicator per GPU.
    pub fn open(world: usize) -> Result<Ranks> {
        check_libraries()?;
        // SAFETY: only tries to dlopen candidate library names.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(DeviceError::Unavailable(
                "cannot load libnccl.so (put the NCCL library folder on LD_LIBRARY_PATH)".into(),
            ));
        }
        if std::env::var("NCCL_NVLS_ENABLE").as_deref() != Ok("0") {
            return Err(DeviceError::Refused(
                "set NCCL_NVLS_ENABLE=0 (NVLink multicast must stay off)".into(),
            ));
        }
        if world < 2 {
            return Err(DeviceError::Refused(format!(
                "a world of {world} GPU(s) needs no communicator"
            )));
        }
        let gpus = (0..world).map(Gpu::open).collect::<Result<Vec<_>>>()?;
        let comms =
            Comm::from_devices(gpus.iter().map(|g| g.stream.clone()).collect()).map_err(nccl_err("ncclCommInitAll"))?;
        Ok(Ranks { gpus, comms })
    }

    pub fn world(&self) -> usize {
        self.gpus.len()
    }

    fn sync_all(&self) -> Result<()> {
        self.gpus.iter().try_for_each(|g| g.sync())
    }

    /// All-gather of equally sized byte shards: every rank receives the
    /// concatenation shard 0 | shard 1 | ... (rank order).
    pub fn all_gather_bytes(&self, shards: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
        let w = self.world();
        if shards.len() != w || shards.iter().any(|s| s.len() != shards[0].len() || s.is_empty()) {
            return Err(DeviceError::Refused(
                "all-gather needs one non-empty shard per rank, all of one size".into(),
            ));
        }
        let len = shards[0].len();
        let mut send = Vec::new();
        let mut recv = Vec::new();
        for (g, shard) in self.gpus.iter().zip(shards) {
            send.push(g.stream.clone_htod(shard).map_err(driver_err("upload shard"))?);
            recv.push(
                g.stream
                    .alloc_zeros::<u8>(len * w)
                    .map_err(driver_err("alloc gather"))?,
            );
        }
        nccl::group_start().map_err(nccl_err("group start"))?;
        for ((c, s), r) in self.comms.iter().zip(&send).zip(recv.iter_mut()) {
            c.all_gather(s, r).map_err(nccl_err("all_gather"))?;
        }
        nccl::group_end().map_err(nccl_err("group end"))?;
        self.sync_all()?;
        self.gpus
            .iter()
            .zip(&recv)
            .map(|(g, r)| g.stream.clone_dtoh(r).map_err(driver_err("download gather")))
            .collect()
    }

    /// All-reduce (sum) of f32 vectors of one length: NCCL's own order.
    pub fn all_reduce_sum(&self, parts: &[Vec<f32>]) -> Result<Vec<Vec<f32>>> {
        self.reduce_sum(parts, false)
    }

    /// Reduce-scatter (sum) of f32 vectors of one length L (a multiple of
    /// the world size): rank r receives elements `r*L/WS..(r+1)*L/WS` of
    /// the sum, in NCCL's own order.
    pub fn reduce_scatter_sum(&self, parts: &[Vec<f32>]) -> Result<Vec<Vec<f32>>> {
        self.reduce_sum(parts, true)
    }

    fn reduce_sum(&self, parts: &[Vec<f32>], scatter: bool) -> Result<Vec<Vec<f32>>> {
        let w = self.world();
        if parts.len() != w || parts.iter().any(|p| p.len() != parts[0].len() || p.is_empty()) {
            return Err(DeviceError::Refused(
                "a reduction needs one non-empty vector per rank, all of one length".into(),
            ));
        }
        let len = parts[0].len();
        if scatter && !len.is_multiple_of(w) {
            return Err(DeviceError::Refused(format!(
                "reduce-scatter of {len} elements over {w} ranks: not a multiple"
            )));
        }
        let out_len = if scatter { len / w } else { len };
        let mut send = Vec::new();
        let mut recv = Vec::new();
        for (g, p) in self.gpus.iter().zip(parts) {
            send.push(g.stream.clone_htod(p).map_err(driver_err("upload part"))?);
            recv.push(
                g.stream
                    .alloc_zeros::<f32>(out_len)
                    .map_err(driver_err("alloc reduce"))?,
            );
        }
        nccl::group_start().map_err(nccl_err("group start"))?;
        for ((c, s), r) in self.comms.iter().zip(&send).zip(recv.iter_mut()) {
            if scatter {
                c.reduce_scatter(s, r, &ReduceOp::Sum)
                    .map_err(nccl_err("reduce_scatter"))?;
            } else {
                c.all_reduce(s, r, &ReduceOp::Sum).map_err(nccl_err("all_reduce"))?;
            }
        }
        nccl::group_end().map_err(nccl_err("group end"))?;
        self.sync_all()?;
        self.gpus
            .iter()
            .zip(&recv)
            .map(|(g, r)| g.stream.clone_dtoh(r).map_err(driver_err("download reduce")))
            .collect()
    }
}
