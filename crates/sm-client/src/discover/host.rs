//! Facts about the machine the benchmark runs on, and the launch command of a
//! local server (read for limits such as `--max-num-seqs`, stored redacted).

use std::collections::HashSet;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sm_core::record::{Gpu, Hardware};

/// A wedged GPU driver can make `nvidia-smi` hang; the run must not.
const NVIDIA_SMI_TIMEOUT: Duration = Duration::from_secs(10);

/// GPUs, CPU model, kernel and OS of this machine. Missing facts stay empty.
pub fn hardware() -> Hardware {
    let gpus = nvidia_smi().map(|out| parse_nvidia_smi(&out)).unwrap_or_default();
    let read = |path: &str| std::fs::read_to_string(path).ok();
    Hardware {
        os: read("/etc/os-release").and_then(|t| pretty_name(&t)).unwrap_or_else(|| std::env::consts::OS.to_string()),
        kernel: read("/proc/sys/kernel/osrelease").map(|k| k.trim().to_string()).filter(|k| !k.is_empty()),
        cpu: read("/proc/cpuinfo").and_then(|t| cpu_model(&t)),
        gpu_count: u32::try_from(gpus.len()).unwrap_or(u32::MAX),
        gpus,
    }
}

fn nvidia_smi() -> Option<String> {
    let mut child = Command::new("nvidia-smi")
        .args(["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + NVIDIA_SMI_TIMEOUT;
    // The output is a few lines, far below a pipe's buffer, so waiting before reading cannot block.
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    Some(out)
}

/// `NVIDIA H200 NVL, 143771` lines (name, MiB).
pub fn parse_nvidia_smi(output: &str) -> Vec<Gpu> {
    output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| match line.rsplit_once(',') {
            Some((name, mem)) => Gpu { name: name.trim().to_string(), memory_mib: mem.trim().parse().ok() },
            None => Gpu { name: line.to_string(), memory_mib: None },
        })
        .collect()
}

/// The first `model name` of /proc/cpuinfo.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_string()).filter(|v| !v.is_empty())
    })
}

/// `PRETTY_NAME` of /etc/os-release, unquoted.
pub fn pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|line| {
        let value = line.trim().strip_prefix("PRETTY_NAME=")?;
        let value = value.trim().trim_matches('"').trim_matches('\'');
        (!value.is_empty()).then(|| value.to_string())
    })
}

/// Inodes of the sockets listening on `port` in a /proc/net/tcp or tcp6 table.
pub fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    const LISTEN: &str = "0A";
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let (_, port_hex) = local.rsplit_once(':')?;
            let listening = u16::from_str_radix(port_hex, 16).ok()? == port && *fields.get(3)? == LISTEN;
            let inode: u64 = fields.get(9)?.parse().ok()?;
            (listening && inode != 0).then_some(inode)
        })
        .collect()
}

/// The command line of the local process listening on TCP `port`, redacted;
/// `None` when no process here listens on it or it belongs to another user.
pub fn launch_command_for_port(port: u16) -> Option<String> {
    let mut inodes = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            inodes.extend(listening_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let wanted: HashSet<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|n| n.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        // Other users' fd tables are unreadable; skip them.
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let owns = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| target.to_str().is_some_and(|t| wanted.contains(t)))
        });
        if owns {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            return command_line(&raw).map(|c| sm_core::redact::redact_command(&c));
        }
    }
    None
}

/// `/proc/PID/cmdline`: arguments separated (and ended) by NULs.
fn command_line(raw: &[u8]) -> Option<String> {
    let args: Vec<String> =
        raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    (!args.is_empty()).then(|| args.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_lines() {
        let gpus = parse_nvidia_smi("NVIDIA H200 NVL, 143771\nNVIDIA H200 NVL, 143771\n\n");
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0], Gpu { name: "NVIDIA H200 NVL".into(), memory_mib: Some(143771) });
        let odd = parse_nvidia_smi("Tesla T4, [N/A]\nweird");
        assert_eq!(odd[0].memory_mib, None);
        assert_eq!(odd[1], Gpu { name: "weird".into(), memory_mib: None });
        assert!(parse_nvidia_smi("").is_empty());
    }

    #[test]
    fn cpu_and_os() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 9654 96-Core Processor"));
        assert_eq!(cpu_model("processor : 0\nCPU part : 0xd0c\n"), None);
        let os = "NAME=\"Ubuntu\"\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n";
        assert_eq!(pretty_name(os).as_deref(), Some("Ubuntu 24.04.1 LTS"));
        assert_eq!(pretty_name("NAME=x\n"), None);
    }

    #[test]
    fn proc_net_tcp_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F40 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 100 0 0 10 0
";
        assert_eq!(listening_inodes(table, 8000), vec![123456]);
        assert_eq!(listening_inodes(table, 22), vec![999]);
        assert!(listening_inodes(table, 8001).is_empty());
        let tcp6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
";
        assert_eq!(listening_inodes(tcp6, 8080), vec![4242]);
    }

    #[test]
    fn cmdline_nuls_become_spaces() {
        assert_eq!(command_line(b"vllm\0serve\0m\0").as_deref(), Some("vllm serve m"));
        assert_eq!(command_line(b""), None);
    }

    #[test]
    fn finds_this_process_by_its_listener() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cmd = launch_command_for_port(port).expect("our own listener is found");
        let exe = std::env::args().next().unwrap();
        assert!(cmd.contains(&exe), "{cmd:?} should contain {exe:?}");
        drop(listener);
        assert_eq!(launch_command_for_port(port), None);
    }

    #[test]
    fn hardware_has_an_os() {
        let hw = hardware();
        assert!(!hw.os.is_empty());
        assert_eq!(hw.gpu_count as usize, hw.gpus.len());
    }
}
