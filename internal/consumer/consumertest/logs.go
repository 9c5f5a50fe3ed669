package consumertest

import (
	"bytes"
	"strings"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for concurrent use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Count is how often sub was written.
func (s *SyncBuffer) Count(sub string) int { return strings.Count(s.String(), sub) }
