//! The copy manager's view of the process (SPC-4): every logical unit a third-party copy may
//! name as a copy source or destination, found by its VPD 83h designators, and the ROD tokens
//! POPULATE TOKEN created (SBC-4). One copy manager is shared by every target of a `stint
//! serve`, so copies and tokens cross LUNs and targets of one process.
//!
//! A logical unit's core is its own; what copies from another unit check of it (is it ready,
//! write protected, reserved by someone else) it publishes in a [`UnitView`], which it updates
//! when any of it changes. The copy itself runs in the data plane of the destination, reading
//! from the source's plane.

use crate::persistent_reservation::PersistentReservations;
use crate::read_write_long::Uncorrectable;
use crate::{Nexus, Ns};
use parking_lot::{Mutex, RwLock};
use scsi::table::ReservationAccess;
use scsi::third_party_copy::{self as tpc, CscdDescriptor, Range, RodToken};
use scsi::{Sense, SenseKey};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use store::Plane;

/// What a copy from another logical unit checks of this one, as its core last published it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Published {
    /// Medium present and the unit started.
    pub(crate) ready: bool,
    pub(crate) write_protected: bool,
    /// The nexus holding a RESERVE (6)/(10) reservation, and the persistent reservations.
    pub(crate) spc2_holder: Option<crate::reservations::Spc2Holder>,
    pub(crate) persistent: PersistentReservations,
    /// The relative target port identifier of the server's target port.
    pub(crate) target_port: u16,
}

/// A logical unit as other units' copies see it.
pub(crate) struct UnitView {
    pub(crate) naa: [u8; 16],
    pub(crate) eui64: [u8; 8],
    pub(crate) block_size: u32,
    /// The capacity in blocks, which a resized store changes ([`UnitView::resize`]).
    blocks: AtomicU64,
    pub(crate) plane: Arc<dyn Plane>,
    published: Mutex<Published>,
    /// Blocks WRITE LONG marked uncorrectable: a copy that writes one makes it readable.
    pub(crate) uncorrectable: Arc<Uncorrectable>,
}

impl UnitView {
    pub(crate) fn new(
        naa: [u8; 16],
        eui64: [u8; 8],
        block_size: u32,
        blocks: u64,
        plane: Arc<dyn Plane>,
        uncorrectable: Arc<Uncorrectable>,
    ) -> Self {
        UnitView {
            naa,
            eui64,
            block_size,
            blocks: AtomicU64::new(blocks),
            plane,
            published: Mutex::default(),
            uncorrectable,
        }
    }

    /// Whether a CSCD descriptor names this unit: its NAA or EUI-64 designator (binary code
    /// set, logical unit association) from VPD 83h.
    pub(crate) fn designated_by(&self, c: &CscdDescriptor) -> bool {
        if c.code_set != 0x01 || c.association != 0 {
            return false;
        }
        match c.designator_type {
            0x03 => c.designator == self.naa,
            0x02 => c.designator == self.eui64,
            _ => false,
        }
    }

    pub(crate) fn blocks(&self) -> u64 {
        self.blocks.load(Ordering::Relaxed)
    }

    pub(crate) fn resize(&self, blocks: u64) {
        self.blocks.store(blocks, Ordering::Relaxed);
    }

    pub(crate) fn publish(&self, p: Published) {
        *self.published.lock() = p;
    }

    /// Whether `nexus` could send this unit a READ(16) (`write` false) or WRITE(16): it is
    /// ready and no other nexus's reservation refuses it (SPC-4 table 65).
    pub(crate) fn reachable(&self, nexus: &Nexus, write: bool) -> bool {
        let p = self.published.lock();
        if !p.ready {
            return false;
        }
        let access = if write {
            ReservationAccess::Write
        } else {
            ReservationAccess::Read
        };
        match &p.spc2_holder {
            Some(holder) => holder.is(nexus, p.target_port),
            None => !p.persistent.conflicts(
                crate::persistent_reservation::It {
                    initiator_port: &nexus.initiator_port,
                    target_port: p.target_port,
                },
                access,
            ),
        }
    }

    pub(crate) fn write_protected(&self) -> bool {
        self.published.lock().write_protected
    }
}

/// What the copy manager knows about a token it created.
struct Token {
    bytes: Box<RodToken>,
    /// The logical unit whose blocks it represents.
    source: CscdDescriptor,
    ranges: Vec<Range>,
    inactivity_timeout: Ns,
    last_used: Ns,
    /// A write to the represented blocks revoked it; kept until its timeout so that its
    /// users learn why.
    revoked: bool,
}

/// A valid token's contents, for WRITE USING TOKEN.
pub(crate) struct TokenData {
    pub(crate) source: CscdDescriptor,
    pub(crate) ranges: Vec<Range>,
}

/// The logical units a copy may reach and the ROD tokens.
#[derive(Default)]
pub struct CopyManager {
    units: RwLock<Vec<Arc<UnitView>>>,
    tokens: Mutex<Vec<Token>>,
    /// Tokens not revoked: while there are none, writes skip the revocation check.
    live: AtomicUsize,
    next_id: AtomicU64,
    /// Seeds the unguessable part of each token (SipHash keys drawn at start).
    secret: RandomState,
}

impl CopyManager {
    /// Make a unit reachable through this copy manager.
    pub(crate) fn register(&self, view: Arc<UnitView>) {
        self.units.write().push(view);
    }

    /// Makes a unit unreachable (it left its target).
    pub(crate) fn unregister(&self, view: &Arc<UnitView>) {
        self.units.write().retain(|u| !Arc::ptr_eq(u, view));
    }

    /// The unit a CSCD descriptor names, if one of ours has that designator.
    pub(crate) fn find(&self, cscd: &CscdDescriptor) -> Option<Arc<UnitView>> {
        self.units
            .read()
            .iter()
            .find(|u| u.designated_by(cscd))
            .cloned()
    }

    /// Drop tokens whose inactivity timeout passed by `now`.
    fn expire(&self, tokens: &mut Vec<Token>, now: Ns) {
        tokens.retain(|t| {
            let keep = now.saturating_sub(t.last_used) <= t.inactivity_timeout;
            if !keep && !t.revoked {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            keep
        });
    }

    /// A new token for `ranges` of the unit `source` names, `bytes` long, alive for
    /// `inactivity_timeout_s` seconds of disuse from `now`.
    pub(crate) fn create_token(
        &self,
        now: Ns,
        source: CscdDescriptor,
        ranges: Vec<Range>,
        bytes: u64,
        inactivity_timeout_s: u32,
    ) -> Box<RodToken> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut secret = [0u8; 32];
        for (i, part) in secret.chunks_exact_mut(8).enumerate() {
            part.copy_from_slice(&self.secret.hash_one((id, i)).to_be_bytes());
        }
        let bytes = Box::new(tpc::make_token(id, &source, bytes, secret));
        let mut tokens = self.tokens.lock();
        self.expire(&mut tokens, now);
        tokens.push(Token {
            bytes: bytes.clone(),
            source,
            ranges,
            inactivity_timeout: u64::from(inactivity_timeout_s) * 1_000_000_000,
            last_used: now,
            revoked: false,
        });
        self.live.fetch_add(1, Ordering::Relaxed);
        bytes
    }

    /// The token `bytes` for a WRITE USING TOKEN at `now`: TOKEN UNKNOWN if we never made it
    /// or it expired and is gone, TOKEN REVOKED after a write to its blocks. Using it restarts
    /// its inactivity timeout; `delete` ends it (DEL_TKN).
    pub(crate) fn use_token(
        &self,
        now: Ns,
        bytes: &RodToken,
        delete: bool,
    ) -> Result<TokenData, Sense> {
        let mut tokens = self.tokens.lock();
        self.expire(&mut tokens, now);
        let refuse = |asc| Sense::new(SenseKey::IllegalRequest, asc);
        let i = tokens
            .iter()
            .position(|t| t.bytes[..] == bytes[..])
            .ok_or_else(|| refuse(tpc::TOKEN_UNKNOWN))?;
        if tokens[i].revoked {
            return Err(refuse(tpc::TOKEN_REVOKED));
        }
        let data = TokenData {
            source: tokens[i].source.clone(),
            ranges: tokens[i].ranges.clone(),
        };
        if delete {
            tokens.remove(i);
            self.live.fetch_sub(1, Ordering::Relaxed);
        } else {
            tokens[i].last_used = now;
        }
        Ok(data)
    }

    /// `blocks` from `lba` of the unit `view` are about to change: revoke the tokens that
    /// represent any of them. One relaxed load while no token is live.
    pub(crate) fn written(&self, view: &UnitView, lba: u64, blocks: u64) {
        if self.live.load(Ordering::Relaxed) == 0 {
            return;
        }
        let end = lba.saturating_add(blocks);
        let mut tokens = self.tokens.lock();
        for t in tokens.iter_mut().filter(|t| !t.revoked) {
            let overlaps = t
                .ranges
                .iter()
                .any(|r| r.lba < end && lba < r.lba.saturating_add(u64::from(r.blocks)));
            if overlaps && view.designated_by(&t.source) {
                t.revoked = true;
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
