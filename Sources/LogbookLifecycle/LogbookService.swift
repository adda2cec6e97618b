import Logbook
