//! Where a LUN's size comes from (issue 19, item 1's parenthesis): `size`, else a drive
//! model's capacity, else the store's own (an existing file's length). A `[queue]` or `[cdl]`
//! table alone is no drive model: it neither sizes the LUN nor fixes its block size.

mod common;
use common::cdb::{read_capacity16, test_unit_ready};
use common::Server;
use iscsi::initiator::{Initiator, LoginOptions};
use iscsi::url::IscsiUrl;

/// READ CAPACITY(16) of the server's only LUN: (blocks, block length).
fn capacity(server: &Server) -> (u64, u32) {
    let url: IscsiUrl = server.urls[0].parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let opts = LoginOptions::new("iqn.2026-11.dev.stint:size-test", Some(&url.target));
        let mut s = Initiator::connect_portal(&url.portal, &opts).await.unwrap();
        let _unit_attention = s.scsi_command(url.lun, &test_unit_ready(), &[], 0).await;
        let cdb = read_capacity16();
        let r = s.scsi_command(url.lun, &cdb, &[], 32).await.unwrap();
        assert_eq!(r.status, 0, "{:?}", r.parsed_sense());
        let d = &r.data_in;
        (
            u64::from_be_bytes(d[..8].try_into().unwrap()) + 1,
            u32::from_be_bytes(d[8..12].try_into().unwrap()),
        )
    })
}

fn serve(dir: &std::path::Path, lun: &str) -> Server {
    let path = dir.join("stint.toml");
    let text =
        format!("[[target]]\nname = \"iqn.2026-11.dev.stint:size\"\n[[target.lun]]\n{lun}\n");
    std::fs::write(&path, text).unwrap();
    Server::start(&["--config", path.to_str().unwrap()], 1)
}

#[test]
fn the_size_comes_from_the_store_unless_a_drive_model_sets_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("existing.img");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let path = format!("path = \"{}\"", file.display());
    // (keys, blocks, block length)
    let cases = [
        // An existing 64 MiB file with a queue or CDL pages: its length (it was refused as
        // not 1 TiB, the instant model's capacity).
        (
            format!("store = \"file\"\n{path}\n[target.lun.queue]\ndepth = 8"),
            (64 << 20) / 512,
            512,
        ),
        (
            format!("store = \"file\"\n{path}\nblock_size = 4096\n[target.lun.cdl]"),
            (64 << 20) / 4096,
            4096,
        ),
        // RAM has no size of its own: `size`, beyond the instant model's 1 TiB.
        (
            "store = \"ram\"\nsize = \"2TiB\"\n[target.lun.queue]".to_owned(),
            (2 << 40) / 512,
            512,
        ),
        // A drive model still sizes the LUN: a new file is created with its capacity.
        (
            format!(
                "store = \"file\"\npath = \"{}\"\n[target.lun.drive]\nmodel = \"instant\"\ncapacity = \"16MiB\"",
                dir.path().join("new.img").display()
            ),
            (16 << 20) / 512,
            512,
        ),
    ];
    for (lun, blocks, block) in cases {
        let server = serve(dir.path(), &lun);
        assert_eq!(capacity(&server), (blocks, block), "{lun}");
        assert!(server.stop(), "{lun}");
    }
    assert_eq!(
        std::fs::metadata(dir.path().join("new.img")).unwrap().len(),
        16 << 20
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 64 << 20);
}
