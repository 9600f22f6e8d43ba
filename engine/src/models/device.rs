//! The device a job or a command computes on: [`DeviceSpec`], parsed once
//! where it is given (`--device`, the workbench's form, a session's
//! `config.toml`) and opened once, by [`select_device`], where the work runs.

use candle_core::Device;

use crate::{Error, Result};

/// A device as asked for: `auto`, `cpu`, `cuda` (GPU 0) or `cuda:<index>`.
/// Parsing ([`std::str::FromStr`]) checks the spelling only; [`select_device`]
/// opens it. Written as its spelling ([`std::fmt::Display`]: `auto`, `cpu`,
/// `cuda:1`), which is how a session's `config.toml` records it (serde reads
/// the same strings back, and the empty string as `auto`, as early sessions
/// recorded it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    /// CUDA GPU 0 when the build has CUDA and one answers, else the CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA GPU `i`.
    Cuda(usize),
}

impl std::str::FromStr for DeviceSpec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "auto" => Ok(DeviceSpec::Auto),
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" => Ok(DeviceSpec::Cuda(0)),
            t => t
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceSpec::Cuda)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "--device {t:?}: expected auto, cpu, cuda or cuda:<index>"
                    ))
                }),
        }
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl serde::Serialize for DeviceSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for DeviceSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Ok(DeviceSpec::Auto);
        }
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl DeviceSpec {
    /// Whether it names a GPU (`cuda`, `cuda:i`); `auto` does not.
    pub fn is_cuda(self) -> bool {
        matches!(self, DeviceSpec::Cuda(_))
    }

    /// Error when it names a GPU and this build has no CUDA support: what
    /// can be known without opening a device (a job's request is checked so
    /// before its session is written; whether the GPU answers is
    /// [`select_device`]'s question, asked once where the job runs).
    pub fn check_build(self) -> Result<()> {
        if self.is_cuda() && !cfg!(feature = "cuda") {
            return Err(no_cuda_build(self));
        }
        Ok(())
    }

    /// Whether a job asked to run on `self` will compute on the CPU for
    /// certain: `cpu`, or `auto` in a build without CUDA (`auto` in a CUDA
    /// build is known only when the device opens).
    pub fn computes_on_cpu(self) -> bool {
        match self {
            DeviceSpec::Cpu => true,
            DeviceSpec::Auto => !cfg!(feature = "cuda"),
            DeviceSpec::Cuda(_) => false,
        }
    }
}

fn no_cuda_build(spec: DeviceSpec) -> Error {
    Error::invalid(format!(
        "--device {spec}: this build of rosetta has no CUDA support \
         (rebuild with `cargo build --features cuda`); use --device cpu or auto"
    ))
}

/// Opens the device `spec` asks for: `auto` (CUDA GPU 0 when this build has
/// CUDA and a GPU answers, else CPU), `cpu`, `cuda` or `cuda:i`. Returns the
/// device and its name as recorded in the session (`cpu`, `cuda:0`).
pub fn select_device(spec: DeviceSpec) -> Result<(Device, String)> {
    let cuda = cfg!(feature = "cuda") && candle_core::utils::cuda_is_available();
    match spec {
        DeviceSpec::Cpu => Ok((Device::Cpu, "cpu".into())),
        DeviceSpec::Auto => {
            if cuda {
                if let Ok(d) = Device::new_cuda(0) {
                    return Ok((d, "cuda:0".into()));
                }
            }
            Ok((Device::Cpu, "cpu".into()))
        }
        DeviceSpec::Cuda(i) => {
            if !cfg!(feature = "cuda") {
                return Err(no_cuda_build(spec));
            }
            if !cuda {
                return Err(Error::invalid(format!(
                    "--device {spec}: no CUDA GPU answers on this machine; use --device cpu or auto"
                )));
            }
            Device::new_cuda(i)
                .map(|d| (d, format!("cuda:{i}")))
                .map_err(|e| {
                    Error::invalid(format!(
                        "--device {spec}: no usable CUDA GPU {i} ({})",
                        cuda_error_text(e)
                    ))
                })
        }
    }
}

/// A CUDA error as one line: without the backtrace candle attaches when
/// `RUST_BACKTRACE` is set, and saying what a stub driver library means.
fn cuda_error_text(e: candle_core::Error) -> String {
    let inner = match e {
        candle_core::Error::WithBacktrace { inner, .. } => *inner,
        e => e,
    };
    let text = inner.to_string();
    if text.contains("CUDA_ERROR_STUB_LIBRARY") {
        format!(
            "{text}: the libcuda.so.1 loaded is a stub, not an NVIDIA driver's; \
             this machine has no GPU driver, or LD_LIBRARY_PATH puts a stub first"
        )
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_round_trips_and_reads_early_sessions() {
        for (s, d) in [
            ("auto", DeviceSpec::Auto),
            ("cpu", DeviceSpec::Cpu),
            ("cuda:0", DeviceSpec::Cuda(0)),
            ("cuda:3", DeviceSpec::Cuda(3)),
        ] {
            assert_eq!(s.parse::<DeviceSpec>().unwrap(), d);
            assert_eq!(d.to_string(), s);
        }
        assert_eq!(" cuda ".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(0));
        for bad in ["gpu", "cuda:", "cuda:x", "", "CPU"] {
            let e = bad.parse::<DeviceSpec>().unwrap_err().to_string();
            assert!(e.contains("expected auto, cpu, cuda"), "{bad}: {e}");
        }
        // as a session's config.toml holds it: a string, "" read as auto
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct C {
            device_request: DeviceSpec,
        }
        let text = toml::to_string(&C {
            device_request: DeviceSpec::Cuda(1),
        })
        .unwrap();
        assert_eq!(text.trim(), r#"device_request = "cuda:1""#);
        assert_eq!(
            toml::from_str::<C>(&text).unwrap().device_request,
            DeviceSpec::Cuda(1)
        );
        let early: C = toml::from_str(r#"device_request = """#).unwrap();
        assert_eq!(early.device_request, DeviceSpec::Auto);
        let e = toml::from_str::<C>(r#"device_request = "tpu""#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected auto, cpu, cuda"), "{e}");
    }

    #[test]
    fn device_selection() {
        let (d, name) = select_device(DeviceSpec::Cpu).unwrap();
        assert!(d.is_cpu());
        assert_eq!(name, "cpu");
        let (_, auto) = select_device(DeviceSpec::Auto).unwrap();
        if !cfg!(feature = "cuda") {
            assert_eq!(auto, "cpu");
            let e = select_device(DeviceSpec::Cuda(0)).unwrap_err().to_string();
            assert!(e.contains("no CUDA support"), "{e}");
            let e = DeviceSpec::Cuda(0).check_build().unwrap_err().to_string();
            assert!(e.contains("no CUDA support"), "{e}");
        }
    }
}
