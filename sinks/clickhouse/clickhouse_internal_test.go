package clickhouse

import (
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestCompressionForLoopbackOnlyIsOff(t *testing.T) {
	for addr, want := range map[string]clickhouse.CompressionMethod{
		"127.0.0.1:9000": clickhouse.CompressionNone,
		"[::1]:9000":     clickhouse.CompressionNone,
		"localhost:9000": clickhouse.CompressionNone,
		"127.0.0.9":      clickhouse.CompressionNone,
		"10.0.0.5:9000":  clickhouse.CompressionLZ4,
		"ch.internal:90": clickhouse.CompressionLZ4,
	} {
		if got := compressionFor(addr); got != want {
			t.Errorf("compressionFor(%q) = %v, want %v", addr, got, want)
		}
	}
}
