//! What the tests over a Ceph cluster share: the cluster's ceph.conf (`STINT_CEPH_CONF`, as
//! `./test.sh` sets it after `tests/ceph/cluster.sh start`) and fresh RBD images.

#![allow(dead_code)] // each test binary uses a different part

use std::process::Command;

/// The cluster's ceph.conf; a test asked to run without one fails.
pub fn cluster(test: &str) -> String {
    match std::env::var("STINT_CEPH_CONF") {
        Ok(conf) if !conf.is_empty() => conf,
        _ => panic!("{test}: STINT_CEPH_CONF is not set (./test.sh starts a cluster)"),
    }
}

/// A fresh image in pool rbd, removed when dropped.
pub struct Image {
    pub conf: String,
    pub name: String,
}

impl Image {
    /// Image `name`-PID of `size` (`rbd create --size`: "64M", "67108864B"), made again if a
    /// run that died left it.
    pub fn new(conf: &str, name: &str, size: &str) -> Image {
        let img = Image {
            conf: conf.into(),
            name: format!("{name}-{}", std::process::id()),
        };
        let _ = img.rbd(&["rm", "--no-progress", &img.spec()]);
        let (ok, err) = img.rbd(&["create", "--size", size, &img.spec()]);
        assert!(ok, "rbd create {}: {err}", img.spec());
        img
    }

    /// "rbd/NAME".
    pub fn spec(&self) -> String {
        format!("rbd/{}", self.name)
    }

    /// `--lun rbd:rbd/IMAGE:CONF`.
    pub fn lun(&self) -> String {
        format!("rbd:{}:{}", self.spec(), self.conf)
    }

    /// The image's size, as `rbd info` reports it.
    pub fn size(&self) -> u64 {
        let out = Command::new("rbd")
            .args(["-c", &self.conf, "info", "--format", "json", &self.spec()])
            .output()
            .expect("run rbd");
        assert!(out.status.success(), "rbd info {}", self.spec());
        let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        info["size"].as_u64().expect("rbd info: size")
    }

    /// `rbd -c CONF args`: whether it succeeded, and its stderr.
    pub fn rbd(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("rbd")
            .args(["-c", &self.conf])
            .args(args)
            .output()
            .expect("run rbd");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = self.rbd(&["rm", "--no-progress", &self.spec()]);
    }
}
