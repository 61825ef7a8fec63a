// Package mpwrite appends msgpack values to a byte slice, producing exactly
// the bytes that github.com/vmihailenco/msgpack/v5's Encoder writes for the
// same Go values with its default options: fixed-width numbers (an int32 is
// always 0xd2 and four bytes, whatever its value), the shortest length
// header for strings, byte slices, arrays and maps, and nil for a nil byte
// slice.
//
// It exists so that quire's hot encoders (record bodies, replay snapshots
// and summaries) can write by hand what the reflection encoder would, with
// one place for the format rules. It writes only; it never reads msgpack,
// which stays with msgpack's decoder behind record's pre-scan. A caller that
// hand-encodes a struct checks against the reflection encoder that the
// bytes agree, field for field.
//
// It imports only the standard library and may be imported by any package.
//
// # Usage
//
//	b = mpwrite.AppendMapLen(b, 2)
//	b = mpwrite.AppendString(mpwrite.AppendString(b, "job_id"), j.ID)
//	b = mpwrite.AppendInt32(mpwrite.AppendString(b, "attempt"), j.Attempt)
package mpwrite
