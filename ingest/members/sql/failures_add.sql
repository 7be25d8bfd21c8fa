-- $1 keys, $2 now, $3 window cut-off: one more failure for each key; a
-- window that has ended starts again at now
INSERT INTO login_failures AS f (key, window_start, failures)
SELECT k, $2, 1 FROM unnest($1::text[]) AS k
ON CONFLICT (key) DO UPDATE SET
    window_start = CASE WHEN f.window_start <= $3 THEN $2 ELSE f.window_start END,
    failures     = CASE WHEN f.window_start <= $3 THEN 1 ELSE f.failures + 1 END
