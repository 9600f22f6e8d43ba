//! With the `cuda` feature, compiles `src/models/kit/kernels/*.cu` (`rows.cu`, `act.cu`,
//! `lstm.cu`, `bce.cu`, `tf.cu`, `attn.cu`) to PTX with nvcc (the toolkit candle's kernels need too);
//! without it, does nothing.
//! The architecture is `CUDA_COMPUTE_CAP` (as for candle's kernels, default
//! 75, the oldest CUDA 13 supports); the driver compiles the PTX for the GPU
//! it runs on.

fn main() {
    const KERNELS: [&str; 6] = ["rows", "lstm", "act", "bce", "tf", "attn"];
    for k in KERNELS {
        println!("cargo:rerun-if-changed=src/models/kit/kernels/{k}.cu");
    }
    println!("cargo:rerun-if-changed=src/models/kit/kernels/common.cuh");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let cap = std::env::var("CUDA_COMPUTE_CAP")
        .ok()
        .and_then(|c| c.trim().parse::<u32>().ok())
        .unwrap_or(75);
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    for k in KERNELS {
        let src = format!("src/models/kit/kernels/{k}.cu");
        let status = std::process::Command::new(&nvcc)
            .args(["--ptx", "-O3", &format!("-arch=compute_{cap}"), "-o"])
            .arg(out_dir.join(format!("{k}.ptx")))
            .arg(&src)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("{nvcc} failed ({s}) on {src}"),
            Err(e) => panic!("cannot run {nvcc} (the cuda feature needs the CUDA toolkit): {e}"),
        }
    }
}
