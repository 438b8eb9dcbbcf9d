//! The copy manager's view of the process (SPC-4): every logical unit a third-party
//! copy may name as a copy source or destination, found by its VPD 83h designators, and the
//! ROD tokens POPULATE TOKEN created (SPC-4). One copy manager is shared by every
//! target of a `stint serve`, so copies and tokens cross LUNs and targets of one process.

use crate::{LogicalUnit, Ns};
use parking_lot::{Mutex, RwLock};
use scsi::third_party_copy::{self as tpc, CscdDescriptor, Range, RodToken};
use scsi::{Sense, SenseKey};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

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

/// The time source of token lifetimes: the device reads no clock, its owner lends one.
type Clock = Box<dyn Fn() -> Ns + Send + Sync>;

/// The logical units a copy may reach (held weakly: a dropped unit drops out) and the ROD
/// tokens.
#[derive(Default)]
pub struct CopyManager {
    units: RwLock<Vec<Weak<LogicalUnit>>>,
    tokens: Mutex<Vec<Token>>,
    /// Tokens not revoked: while there are none, writes skip the revocation check.
    live: AtomicUsize,
    next_id: AtomicU64,
    /// Seeds the unguessable part of each token (SipHash keys drawn at start).
    secret: RandomState,
    /// `None`: tokens do not expire by time (they are still revoked and deleted).
    clock: Option<Clock>,
}

impl CopyManager {
    /// A copy manager whose tokens expire after their inactivity timeout on `clock`.
    pub fn with_clock(clock: impl Fn() -> Ns + Send + Sync + 'static) -> Self {
        CopyManager {
            clock: Some(Box::new(clock)),
            ..CopyManager::default()
        }
    }

    fn now(&self) -> Ns {
        self.clock.as_ref().map_or(0, |c| c())
    }

    /// Make `lu` reachable through this copy manager and make it the one `lu`'s copies use.
    /// A logical unit belongs to one copy manager: `false` if it already had one.
    pub fn register(self: &Arc<Self>, lu: &Arc<LogicalUnit>) -> bool {
        if lu.copy_manager.set(Arc::clone(self)).is_err() {
            return false;
        }
        let mut units = self.units.write();
        units.retain(|u| u.strong_count() > 0);
        units.push(Arc::downgrade(lu));
        true
    }

    /// The logical unit a CSCD descriptor names, if one of ours has that designator.
    pub(crate) fn find(&self, cscd: &CscdDescriptor) -> Option<Arc<LogicalUnit>> {
        self.units
            .read()
            .iter()
            .filter_map(Weak::upgrade)
            .find(|lu| lu.designated_by(cscd))
    }

    /// Drop tokens whose inactivity timeout passed.
    fn expire(&self, tokens: &mut Vec<Token>, now: Ns) {
        if self.clock.is_none() {
            return;
        }
        tokens.retain(|t| {
            let keep = now.saturating_sub(t.last_used) <= t.inactivity_timeout;
            if !keep && !t.revoked {
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
            keep
        });
    }

    /// A new token for `ranges` of the unit `source` names, `bytes` long, alive for
    /// `inactivity_timeout_s` seconds of disuse.
    pub(crate) fn create_token(
        &self,
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
        let now = self.now();
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

    /// The token `bytes` for a WRITE USING TOKEN: TOKEN UNKNOWN if we never made it or it
    /// expired and is gone, TOKEN REVOKED after a write to its blocks. Using it restarts its
    /// inactivity timeout; `delete` ends it (DEL_TKN).
    pub(crate) fn use_token(&self, bytes: &RodToken, delete: bool) -> Result<TokenData, Sense> {
        let now = self.now();
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

    /// `blocks` from `lba` of `lu` are about to change: revoke the tokens that represent any
    /// of them. One relaxed load while no token is live.
    pub(crate) fn written(&self, lu: &LogicalUnit, lba: u64, blocks: u64) {
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
            if overlaps && lu.designated_by(&t.source) {
                t.revoked = true;
                self.live.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}
