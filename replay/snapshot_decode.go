package replay

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/quire-dev/quire/journal/record"
)

// The snapshot's job list is decoded field by field with msgpack's
// primitives rather than by reflection: a snapshot holds every active job,
// and it is decoded once when written (its check) and once per Open. The
// result is exactly what the reflection decoder gives for a Job: keys may
// come in any order, a missing key leaves its zero value, an unknown key is
// refused (the decoder's DisallowUnknownFields), and every value accepts the
// encodings msgpack's typed decoders accept.

// keyMax is the longest key a Job or RetryPolicy encoding has, with room.
const keyMax = 32

// decodeKey reads a map key into buf and returns its length. A key longer
// than buf, or nil, cannot be one of ours. Callers switch on string(buf[:n]),
// which compares without allocating.
func decodeKey(dec *msgpack.Decoder, buf *[keyMax]byte) (int, error) {
	n, err := dec.DecodeBytesLen()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > keyMax {
		return 0, fmt.Errorf("%w: snapshot key of %d bytes", record.ErrCorrupt, n)
	}
	return n, dec.ReadFull(buf[:n])
}

// decodeJob reads one Job as appendJob writes it. A nil leaves j zero, as
// with reflection (Decode then refuses the empty id).
func decodeJob(dec *msgpack.Decoder, j *Job) error {
	n, err := dec.DecodeMapLen()
	if err != nil || n < 0 {
		return err
	}
	var buf [keyMax]byte
	for i := 0; i < n; i++ {
		k, err := decodeKey(dec, &buf)
		if err != nil {
			return err
		}
		switch string(buf[:k]) {
		case "ID":
			j.ID, err = dec.DecodeString()
		case "Stream":
			j.Stream, err = dec.DecodeString()
		case "Handler":
			j.Handler, err = dec.DecodeString()
		case "Queue":
			j.Queue, err = dec.DecodeString()
		case "Priority":
			j.Priority, err = dec.DecodeUint8()
		case "EnqueueSeq":
			j.EnqueueSeq, err = dec.DecodeUint64()
		case "AvailableAt":
			j.AvailableAt, err = dec.DecodeInt64()
		case "Retry":
			err = decodeRetry(dec, &j.Retry)
		case "DeliveryTimeoutNanos":
			j.DeliveryTimeoutNanos, err = dec.DecodeInt64()
		case "UniqueKey":
			j.UniqueKey, err = dec.DecodeString()
		case "Payload":
			j.Payload, err = dec.DecodeBytes()
		case "WorkflowID":
			j.WorkflowID, err = dec.DecodeString()
		case "Step":
			j.Step, err = dec.DecodeInt32()
		case "Branch":
			j.Branch, err = dec.DecodeInt32()
		case "Status":
			var s uint8
			s, err = dec.DecodeUint8()
			j.Status = JobStatus(s)
		case "Attempts":
			j.Attempts, err = dec.DecodeInt32()
		case "Consumed":
			j.Consumed, err = dec.DecodeInt32()
		case "Token":
			j.Token, err = dec.DecodeUint64()
		case "StartAt":
			j.StartAt, err = dec.DecodeInt64()
		case "HardAt":
			j.HardAt, err = dec.DecodeInt64()
		case "NormalAt":
			j.NormalAt, err = dec.DecodeInt64()
		case "LastCode":
			j.LastCode, err = dec.DecodeString()
		case "LastError":
			j.LastError, err = dec.DecodeString()
		case "Lost":
			j.Lost, err = dec.DecodeBool()
		default:
			return fmt.Errorf("%w: snapshot job has unknown field %q", record.ErrCorrupt, buf[:k])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeRetry reads a record.RetryPolicy as appendRetry writes it.
func decodeRetry(dec *msgpack.Decoder, p *record.RetryPolicy) error {
	n, err := dec.DecodeMapLen()
	if err != nil {
		return err
	}
	var buf [keyMax]byte
	for i := 0; i < n; i++ {
		k, err := decodeKey(dec, &buf)
		if err != nil {
			return err
		}
		switch string(buf[:k]) {
		case "max_attempts":
			p.MaxAttempts, err = dec.DecodeInt32()
		case "backoff":
			var b uint8
			b, err = dec.DecodeUint8()
			p.Backoff = record.Backoff(b)
		case "base_ns":
			p.BaseNanos, err = dec.DecodeInt64()
		case "max_ns":
			p.MaxNanos, err = dec.DecodeInt64()
		case "jitter":
			p.JitterRatio, err = dec.DecodeFloat64()
		case "list_ns":
			p.ListNanos, err = decodeInt64s(dec)
		default:
			return fmt.Errorf("%w: snapshot retry policy has unknown field %q", record.ErrCorrupt, buf[:k])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeInt64s reads an array of integers, appending as it reads so a
// hostile length costs nothing (RL-6).
func decodeInt64s(dec *msgpack.Decoder) ([]int64, error) {
	n, err := dec.DecodeArrayLen()
	if err != nil || n <= 0 {
		return nil, err
	}
	var out []int64
	for i := 0; i < n; i++ {
		v, err := dec.DecodeInt64()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
