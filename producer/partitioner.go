package producer

import "math/rand/v2"

// murmur2 is the Java client's Utils.murmur2 (a 32-bit MurmurHash2 with seed
// 0x9747b28c), which the default partitioner hashes keys with, so a key lands
// on the partition a Java producer would pick.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := length &^ 3
	switch length % 4 {
	case 3:
		h ^= uint32(data[tail+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[tail+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[tail])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// keyPartition is BuiltInPartitioner.partitionForKey:
// toPositive(murmur2(key)) % numPartitions.
func keyPartition(key []byte, numPartitions int) int32 {
	return (murmur2(key) & 0x7fffffff) % int32(numPartitions)
}

// sticky is the Java client's partitioning of records without a key
// (KIP-480, BuiltInPartitioner): every such record goes to one partition
// until batch.size bytes went there, then a random other one is chosen.
type sticky struct {
	partition int32
	bytes     int
	valid     bool
}

// next returns the partition for a keyless record of size bytes, among
// candidates (the partitions with a leader; all if none has one).
func (s *sticky) next(candidates []int32, size, batchSize int) int32 {
	switching := s.valid && s.bytes >= batchSize
	if s.valid && !switching {
		s.valid = false
		for _, c := range candidates {
			if c == s.partition {
				s.valid = true
				break
			}
		}
	}
	if switching || !s.valid {
		p := candidates[rand.IntN(len(candidates))]
		// Java switches to one of the other partitions when a batch's worth
		// has gone to this one.
		for switching && len(candidates) > 1 && p == s.partition {
			p = candidates[rand.IntN(len(candidates))]
		}
		s.partition, s.bytes, s.valid = p, 0, true
	}
	s.bytes += size
	return s.partition
}
