// Package record owns quire's on-disk record format: the frozen [Kind]
// numbers, one typed [Body] per kind, the msgpack codec of bodies and user
// values, the checksummed envelope around each record, and the structural
// pre-scan ([Prescan]) that every byte read back passes before msgpack sees
// it (spec/reliability.md §3, §4).
//
// It is a leaf: besides the standard library it may import only
// github.com/vmihailenco/msgpack/v5, github.com/oklog/ulid/v2 and quire's
// standard-library-only helpers under internal/ (internal/mpwrite writes the
// hot bodies by hand). It must not import Pebble or any other quire
// package; the journal stores what this package encodes, and replay folds
// what it decodes.
//
// # Envelope
//
// A record is stored under its log key as one envelope. Fixed-width
// integers are big-endian; offsets are in bytes. The stream id is 1 to
// [StreamIDBytesMax] bytes, so idLen is always one byte; payloadLen is the
// shortest uvarint of the payload's length.
//
//	offset        size  field
//	0             2     magic       u16  0x5152 ("QR")
//	2             1     version     u8   1, or 2 (see [Version])
//	3             2     kind        u16  a frozen Kind number
//	5             8     seq         u64  equal to the seq in the key
//	13            4     prevSum     u32  crc of record seq-1; for seq 1 the
//	                                     CRC32C of the engine id
//	17            8     at          i64  Unix nanoseconds, monotone (RL-9)
//	25            1     idLen       uvarint, 1..127
//	26            L     stream id   idLen bytes
//	26+L          P     payloadLen  uvarint (P = 1..10 bytes)
//	26+L+P        N     payload     msgpack of the body, no ext values
//	26+L+P+N      4     crc         u32
//
//	+-------+---+------+--------+---------+------+-----+-----------+-----+---------+-----+
//	| magic |ver| kind |  seq   | prevSum |  at  |idLen| stream id |pLen | payload | crc |
//	|  u16  |u8 | u16  |  u64   |   u32   | i64  |uvar |  L bytes  |uvar | N bytes | u32 |
//	+-------+---+------+--------+---------+------+-----+-----------+-----+---------+-----+
//	 \_______________________________ covered by crc ________________________/
//
//	crc = CRC32C(Castagnoli) over  "e/" + u64be(seq)  ||  bytes [0, 26+L+P+N)
//
// Because the crc covers the log key, a record copied under another seq
// fails its check; because prevSum holds the previous crc, a missing or
// reordered record breaks the chain. [ParseEnvelope] checks, in order: size
// (at most the record cap, at least [EnvelopeBytesMin]), crc, magic,
// version 1 to [Version] (newer is [ErrNewerVersion], not corruption), kind known, header
// seq equal to key seq, idLen, payloadLen equal to the bytes before the crc.
// Chain, time and index checks need the previous record and belong to the
// journal.
//
// # Keys
//
//	prefix  key                                         value
//	e/      "e/" + u64be(seq)                           envelope (the log; key order = seq order)
//	s/      "s/" + uvarint(len(id)) + id + u64be(seq)   empty (per-stream index)
//	x/      "x/" + u64be(seq)                           snapshot of the state after seq
//	m/      "m/" + name                                 metadata: format version, engine id
//	t/      "t/" + uvarint(len(id)) + id                terminal-status index entry of stream id
//
// Only e/ keys and envelopes are defined here ([LogKey]); package journal
// builds the others and owns their values.
//
// Stream ids are length-prefixed in keys as in the envelope, so no id is a
// prefix of another's keys: "a" followed by a seq never collides with
// "a\x00...". Derived keys (s/, t/) are written in the batch of their record.
//
// # Hostile bytes
//
// Every value read back is untrusted even with a valid crc (RL-6). Reads
// run the size cap, the envelope checks, [Prescan], then a decode into the
// kind's concrete struct with unknown fields disallowed; a record decode
// stays within 32 × its input + 1 MiB of allocation and [DepthMax] levels
// of recursion. User data stays opaque bytes inside bodies until a handler
// asks for it through [DecodeValue], which applies a cap, the pre-scan, and
// rewrites timestamps to their 96-bit form so that msgpack cannot read a
// timestamp's data as a map length. [EncodeValue] writes user values in
// that canonical form.
//
// # Usage
//
// Writing, in the appender's goroutine and then the journal's writer:
//
//	p, err := record.Prepare(record.Record{
//		Stream: "wf_01J9Z3",
//		Body:   &record.WorkflowCompleted{WorkflowID: "wf_01J9Z3"},
//	}, record.RecordBytesMaxDefault)
//	if err != nil {
//		return err // wraps record.ErrInvalid or record.ErrTooLarge
//	}
//	val, sum := record.AppendEnvelope(nil, seq, prevSum, at, p)
//	batch.Set(record.LogKey(seq), val, nil)
//	prevSum = sum
//
// Reading:
//
//	env, err := record.ParseEnvelope(seq, val, record.RecordBytesMaxDefault)
//	if err != nil {
//		return err // errors.Is(err, record.ErrCorrupt) or record.ErrNewerVersion
//	}
//	rec, err := env.Decode()
package record
