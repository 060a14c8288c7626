package gcsfence

// SetAfterCheck runs f between a write's check and its upload.
func SetAfterCheck(f func()) { afterCheck = f }
