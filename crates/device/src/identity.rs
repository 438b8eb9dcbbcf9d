//! Stable device identifiers (VPD 83h): the same configuration yields the same NAA and EUI-64
//! across restarts, so multipath and the host's by-id links survive.

use scsi::inquiry::DeviceIdentifiers;

/// IEEE company ID with the locally-administered bit set (first octet 02h), so the
/// identifiers never collide with a registered vendor's.
const LOCAL_COMPANY_ID: [u8; 3] = [0x02, 0x53, 0x54];

/// FNV-1a, 64-bit: tiny, stable across Rust versions and platforms.
fn fnv1a(data: &[u8], seed: u64) -> u64 {
    data.iter().fold(seed ^ 0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// What the identifier is derived from: the serial when configured, else (target name, LUN).
pub(crate) fn identity_key(target_name: &str, lun: u64, serial: Option<&str>) -> Vec<u8> {
    match serial {
        Some(s) => format!("serial:{s}").into_bytes(),
        None => format!("target:{target_name}:lun:{lun}").into_bytes(),
    }
}

/// A serial number derived from the key, for VPD 80h when none is configured.
pub(crate) fn derived_serial(key: &[u8]) -> String {
    format!("{:016X}", fnv1a(key, 0))
}

/// NAA 6 (IEEE Registered Extended, SPC-5 table 505) and EUI-64 (SPC-5 §7.7.6.5) designators.
pub(crate) fn designators(key: &[u8]) -> ([u8; 16], [u8; 8]) {
    let a = fnv1a(key, 1);
    let b = fnv1a(key, 2);
    let mut naa = [0u8; 16];
    // NAA (4 bits) = 6, IEEE COMPANY_ID (24 bits), VENDOR SPECIFIC IDENTIFIER (36 bits),
    // VENDOR SPECIFIC IDENTIFIER EXTENSION (64 bits).
    let company = u32::from_be_bytes([
        0,
        LOCAL_COMPANY_ID[0],
        LOCAL_COMPANY_ID[1],
        LOCAL_COMPANY_ID[2],
    ]);
    let head: u64 = 6 << 60 | u64::from(company) << 36 | (a & 0xF_FFFF_FFFF);
    naa[..8].copy_from_slice(&head.to_be_bytes());
    naa[8..].copy_from_slice(&b.to_be_bytes());
    let mut eui = [0u8; 8];
    eui[..3].copy_from_slice(&LOCAL_COMPANY_ID);
    eui[3..].copy_from_slice(&a.to_be_bytes()[3..]);
    (naa, eui)
}

/// The identifiers of a logical unit reached through target port group `group`, whose one
/// target port has the same relative identifier.
pub(crate) fn device_identifiers(
    vendor: [u8; 8],
    serial: &str,
    key: &[u8],
    group: u16,
) -> DeviceIdentifiers {
    let (naa, eui64) = designators(key);
    DeviceIdentifiers {
        naa,
        eui64,
        vendor,
        serial: serial.to_owned(),
        relative_target_port: group,
        target_port_group: group,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_stable_and_distinct() {
        let k0 = identity_key("iqn.x:t", 0, None);
        let k1 = identity_key("iqn.x:t", 1, None);
        assert_eq!(
            designators(&k0),
            designators(&identity_key("iqn.x:t", 0, None))
        );
        assert_ne!(designators(&k0), designators(&k1));
        let (naa, eui) = designators(&k0);
        assert_eq!(naa[0] >> 4, 6);
        assert_eq!(&eui[..3], &LOCAL_COMPANY_ID);
        // A configured serial wins over the target name.
        assert_eq!(
            designators(&identity_key("a", 0, Some("S1"))),
            designators(&identity_key("b", 7, Some("S1")))
        );
        // Pinned: changing the derivation would change the identity of every deployed LU.
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(hex(&naa), "60253540db04c440a88f5d4fd6e7e187");
        assert_eq!(hex(&eui), "025354c0db04c440");
    }
}
