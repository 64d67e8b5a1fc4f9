"""Mapper: layers of every model onto chips and cores, and the one cost model that judges it."""
