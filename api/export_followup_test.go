package api

// TakeFollowUps hands d's follow-ups over as the pipeline does when it
// builds a successful result, and returns how many there were.
func TakeFollowUps(d *Delivery) int { return len(d.takeFollowUps()) }
