"""Reference implementations the differential tests compare the production paths against: the
slow, obvious way (an Event per event, TransactionFilter per unit), kept out of production (#29)."""
