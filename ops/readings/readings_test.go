package readings

import (
	"context"
	"errors"
	"testing"
)

func TestReadOnceKeepsAnswersOnlyUnderReadings(t *testing.T) {
	reads := 0
	read := func() (int, error) { reads++; return reads, nil }
	ctx := context.Background()
	if a, _ := Once(ctx, "k", read); a != 1 {
		t.Fatalf("first read = %d", a)
	}
	if a, _ := Once(ctx, "k", read); a != 2 {
		t.Errorf("without readings the second call read %d, want a new read (2)", a)
	}

	planning := With(ctx)
	first, _ := Once(planning, "k", read)
	if again, _ := Once(planning, "k", read); again != first {
		t.Errorf("under readings the second call read %d, want the first answer %d", again, first)
	}
	if other, _ := Once(planning, "other", read); other == first {
		t.Errorf("another key got the first key's answer")
	}
	if after, _ := Once(Without(planning), "k", read); after == first {
		t.Errorf("after Without the call got the kept answer %d", after)
	}

	failing := With(ctx)
	if _, err := Once(failing, "f", func() (int, error) { return 0, errors.New("throttled") }); err == nil {
		t.Fatal("the failed read's error was lost")
	}
	if v, err := Once(failing, "f", func() (int, error) { return 7, nil }); err != nil || v != 7 {
		t.Errorf("after a failed read the next call got %d, %v; want a new read", v, err)
	}
}
