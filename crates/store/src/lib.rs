//! Where the bytes live: RAM and sparse files.
