package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
)

// Format constants. They are part of the on-disk format.
const (
	// Magic opens every envelope ("QR").
	Magic uint16 = 0x5152
	// Version is the newest envelope version this code reads and writes.
	// Each record is written with the oldest version whose readers know
	// every field its body carries, so that a build that knows less
	// refuses it as [ErrNewerVersion], not as corruption (its decoder
	// refuses unknown fields): version 1 for most records, 2 for a
	// workflow_started that records on_deadline, a final job_buried or
	// attempt_buried, a workflow_completed or workflow_cancelled that
	// archives buried jobs, a job_requeued that keeps its unique key, a
	// workflow_retried that drops a Then step's output and the
	// shutdown_phase_finished of phase 6 with its completion. Versions 1 to
	// Version are read.
	Version uint8 = 2
	// versionMin is the oldest envelope version.
	versionMin uint8 = 1
	// StreamIDBytesMax bounds a stream id (RL-11).
	StreamIDBytesMax = 127
	// DepthMax bounds msgpack nesting in any decoded value (RL-6).
	DepthMax = 32
	// RecordBytesMaxDefault is the default cap on one encoded record (RL-11).
	RecordBytesMaxDefault = 1 << 20
	// headerBytes is the fixed part: magic, version, kind, seq, prevSum, at.
	headerBytes = 2 + 1 + 2 + 8 + 4 + 8
	// EnvelopeBytesMin is the smallest possible envelope: the fixed header, a
	// one-byte idLen with a one-byte id, a one-byte payloadLen and the crc.
	EnvelopeBytesMin = headerBytes + 1 + 1 + 1 + 4
)

// LogKeyPrefix prefixes the global log's keys: "e/" + u64be(seq).
const LogKeyPrefix = "e/"

// LogKeyBytes is the length of a log key.
const LogKeyBytes = len(LogKeyPrefix) + 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of b (Castagnoli), the checksum used
// throughout the format.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// logKeySum is Checksum(LogKey(seq)), computed over a key on the stack: a
// slice handed to crc32 escapes to the heap, and every record written or
// read starts its crc here.
func logKeySum(seq uint64) uint32 {
	var key [LogKeyBytes]byte
	AppendLogKey(key[:0], seq)
	crc := ^uint32(0)
	for _, b := range key {
		crc = castagnoli[byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// AppendLogKey appends the log key of seq to dst.
func AppendLogKey(dst []byte, seq uint64) []byte {
	dst = append(dst, LogKeyPrefix...)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// LogKey returns the log key of seq.
func LogKey(seq uint64) []byte { return AppendLogKey(make([]byte, 0, LogKeyBytes), seq) }

// ParseLogKey returns the seq of a log key.
func ParseLogKey(key []byte) (uint64, bool) {
	if len(key) != LogKeyBytes || string(key[:len(LogKeyPrefix)]) != LogKeyPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[len(LogKeyPrefix):]), true
}

// Prepared is a record validated and encoded up to the parts the journal
// writer assigns (seq, prevSum, at). Preparing happens in the caller's
// goroutine, before the record joins a group, so one bad append cannot fail
// its neighbours (RL-4).
type Prepared struct {
	Kind    Kind
	Stream  string
	Payload []byte // msgpack encoding of the body
	// Version is the envelope version the body needs (see [Version]);
	// 0 means 1.
	Version uint8
}

// versioned is a body whose envelope version depends on the fields it
// carries.
type versioned interface {
	envelopeVersion() uint8
}

// bodyVersion returns the envelope version b needs.
func bodyVersion(b Body) uint8 {
	if v, ok := b.(versioned); ok {
		return v.envelopeVersion()
	}
	return versionMin
}

// Size returns the envelope length of p, whatever the seq, prevSum and at.
func (p Prepared) Size() int {
	return headerBytes + uvarintLen(uint64(len(p.Stream))) + len(p.Stream) +
		uvarintLen(uint64(len(p.Payload))) + len(p.Payload) + 4
}

// ValidateStream checks a stream id against the format's rules: 1 to
// [StreamIDBytesMax] bytes. Errors wrap [ErrInvalid].
func ValidateStream(id string) error {
	if id == "" {
		return fmt.Errorf("%w: stream id is empty", ErrInvalid)
	}
	if len(id) > StreamIDBytesMax {
		return fmt.Errorf("%w: stream id %.32q... is %d bytes, limit %d", ErrInvalid, id, len(id), StreamIDBytesMax)
	}
	return nil
}

// Prepare validates r (stream id, kind, body) and encodes its body. The
// result is refused with an error wrapping [ErrInvalid] or [ErrTooLarge] if
// its envelope would exceed recordBytesMax.
func Prepare(r Record, recordBytesMax int) (Prepared, error) {
	p, _, err := PrepareAppend(nil, r, recordBytesMax)
	return p, err
}

// PrepareAppend is [Prepare] with the body encoded at the end of buf,
// which it returns extended (as it was on an error). The Prepared's
// Payload is the new tail of buf: a caller that prepares several records
// into one buffer it reuses allocates nothing per record once the buffer
// has grown, and must not reuse buf while a Payload is still needed.
func PrepareAppend(buf []byte, r Record, recordBytesMax int) (Prepared, []byte, error) {
	if r.Body == nil || reflect.ValueOf(r.Body).IsNil() {
		return Prepared{}, buf, fmt.Errorf("%w: record for stream %.32q has no body", ErrInvalid, r.Stream)
	}
	k := r.Body.Kind()
	if err := ValidateStream(r.Stream); err != nil {
		return Prepared{}, buf, fmt.Errorf("%s record: %w", k, err)
	}
	if !k.Known() {
		return Prepared{}, buf, fmt.Errorf("%w: record for stream %q has unknown kind %d", ErrInvalid, r.Stream, k)
	}
	n := len(buf)
	out, err := AppendBody(buf, r.Body)
	if err != nil {
		return Prepared{}, buf, err
	}
	p := Prepared{Kind: k, Stream: r.Stream, Payload: out[n:len(out):len(out)], Version: bodyVersion(r.Body)}
	if size := p.Size(); size > recordBytesMax {
		return Prepared{}, buf, fmt.Errorf("%w: %s record for stream %q is %d bytes, limit %d",
			ErrTooLarge, k, r.Stream, size, recordBytesMax)
	}
	return p, out, nil
}

// AppendEnvelope appends the envelope of p at seq to dst and returns the
// extended buffer and the record's crc (the next record's prevSum). The crc
// covers the log key of seq and every envelope byte before it, so a record
// copied under another seq fails its check.
func AppendEnvelope(dst []byte, seq uint64, prevSum uint32, at int64, p Prepared) ([]byte, uint32) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, Magic)
	dst = append(dst, max(p.Version, versionMin))
	dst = binary.BigEndian.AppendUint16(dst, uint16(p.Kind))
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, prevSum)
	dst = binary.BigEndian.AppendUint64(dst, uint64(at))
	dst = binary.AppendUvarint(dst, uint64(len(p.Stream)))
	dst = append(dst, p.Stream...)
	dst = binary.AppendUvarint(dst, uint64(len(p.Payload)))
	dst = append(dst, p.Payload...)
	crc := crc32.Update(logKeySum(seq), castagnoli, dst[start:])
	dst = binary.BigEndian.AppendUint32(dst, crc)
	return dst, crc
}

// Envelope is a parsed, checked envelope. Payload aliases the parsed
// buffer; Stream is a copy.
type Envelope struct {
	Kind    Kind
	Seq     uint64
	PrevSum uint32
	At      int64 // Unix nanoseconds
	Stream  string
	Payload []byte
	Sum     uint32
}

// ParseEnvelope checks the value stored under the log key of seq, in the
// order of spec/reliability.md §4.2: size, crc, magic, version, kind, seq,
// id length, payload length. It reads no msgpack. Errors wrap [ErrCorrupt],
// or [ErrNewerVersion] for a version this code does not know.
func ParseEnvelope(seq uint64, val []byte, recordBytesMax int) (Envelope, error) {
	if len(val) > recordBytesMax {
		return Envelope{}, corrupt("size", seq, "", fmt.Errorf("value is %d bytes, limit %d", len(val), recordBytesMax))
	}
	if len(val) < EnvelopeBytesMin {
		return Envelope{}, corrupt("size", seq, "", fmt.Errorf("value is %d bytes, shorter than the %d-byte minimum", len(val), EnvelopeBytesMin))
	}
	body := val[:len(val)-4]
	want := binary.BigEndian.Uint32(val[len(val)-4:])
	if got := crc32.Update(logKeySum(seq), castagnoli, body); got != want {
		return Envelope{}, corrupt("checksum", seq, "", fmt.Errorf("crc %08x, stored %08x", got, want))
	}
	if m := binary.BigEndian.Uint16(body[0:2]); m != Magic {
		return Envelope{}, corrupt("magic", seq, "", fmt.Errorf("magic %04x", m))
	}
	if v := body[2]; v < versionMin || v > Version {
		if v > Version {
			return Envelope{}, &RecordError{Op: "version", Seq: seq, Err: fmt.Errorf("%w: envelope version %d, this code reads up to %d", ErrNewerVersion, v, Version)}
		}
		return Envelope{}, corrupt("version", seq, "", fmt.Errorf("envelope version %d", v))
	}
	e := Envelope{
		Kind:    Kind(binary.BigEndian.Uint16(body[3:5])),
		Seq:     binary.BigEndian.Uint64(body[5:13]),
		PrevSum: binary.BigEndian.Uint32(body[13:17]),
		At:      int64(binary.BigEndian.Uint64(body[17:25])),
		Sum:     want,
	}
	if !e.Kind.Known() {
		return Envelope{}, corrupt("kind", seq, "", fmt.Errorf("unknown kind %d", e.Kind))
	}
	if e.Seq != seq {
		return Envelope{}, corrupt("seq", seq, "", fmt.Errorf("header seq %d under key seq %d", e.Seq, seq))
	}
	rest := body[headerBytes:]
	// Lengths must use their shortest uvarint, as AppendEnvelope writes
	// them, so that every accepted envelope has exactly one encoding.
	idLen, n := binary.Uvarint(rest)
	if n <= 0 || n != uvarintLen(idLen) || idLen == 0 || idLen > StreamIDBytesMax || idLen > uint64(len(rest)-n) {
		if n <= 0 {
			return Envelope{}, corrupt("stream", seq, "", fmt.Errorf("stream id length is not a uvarint"))
		}
		return Envelope{}, corrupt("stream", seq, "", fmt.Errorf("bad stream id length %d (%d-byte uvarint, %d bytes left)", idLen, n, len(rest)-n))
	}
	rest = rest[n:]
	e.Stream = string(rest[:idLen])
	rest = rest[idLen:]
	pLen, n := binary.Uvarint(rest)
	if n <= 0 || n != uvarintLen(pLen) || pLen != uint64(len(rest)-n) {
		return Envelope{}, corrupt("payload", seq, e.Stream, fmt.Errorf("payload length does not match the bytes before the crc"))
	}
	e.Payload = rest[n:]
	return e, nil
}

// Decode decodes the envelope's body and returns the record.
func (e Envelope) Decode() (Record, error) {
	b, err := DecodeBody(e.Kind, e.Payload)
	if err != nil {
		return Record{}, &RecordError{Op: "decode", Seq: e.Seq, Stream: e.Stream, Err: err}
	}
	return Record{Seq: e.Seq, At: e.At, Stream: e.Stream, Body: b}, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
