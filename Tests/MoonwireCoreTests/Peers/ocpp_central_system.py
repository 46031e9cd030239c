"""A central system (CSMS) on the `ocpp` library (mobilityhouse), speaking OCPP 1.6 and
2.0.1 on one port: the real peer of moonwire.ocpp's charge point in
examples/protocols/ocpp_test.lua and examples/ocpp_bot.lua.

It answers BootNotification (Accepted, interval 300; Rejected for a vendor named
"reject-me"), Heartbeat, StatusNotification, Authorize (Accepted, Invalid for the
id tag / token "bad") and DataTransfer (vendor "echo" returns its data; data "slow"
answers after 1.5 s). MeterValues has no handler, so a CALL of it gets the library's
CALLERROR. After the BootNotification of a charge point whose id starts with
"probe", it calls that charge point: Reset, GetConfiguration (1.6) / GetVariables
(2.0.1), and an action no OCPP version defines ("Bogus"), then reports what each gave
in a DataTransfer (vendor "report", data: a JSON object).

usage: python ocpp_central_system.py PORT     (prints "listening PORT" when ready)
"""
import asyncio
import dataclasses
import json
import logging
import sys
from datetime import datetime, timezone

import websockets
from ocpp.routing import after, on
from ocpp.v16 import ChargePoint as Cp16, call as call16, call_result as result16
from ocpp.v201 import ChargePoint as Cp201, call as call201, call_result as result201

logging.basicConfig(level=logging.WARNING)


def now():
    return datetime.now(timezone.utc).isoformat()


@dataclasses.dataclass
class Bogus:
    note: str = "an action no OCPP version defines"


async def outcome(cp, payload):
    """What one call to the charge point gave, in words the test compares."""
    try:
        result = await cp.call(payload, suppress=False,
                               skip_schema_validation=isinstance(payload, Bogus))
        return {"result": dataclasses.asdict(result) if dataclasses.is_dataclass(result) else result}
    except Exception as e:  # a CALLERROR comes back as an OCPPError subclass
        return {"error": type(e).__name__, "code": getattr(e, "code", None),
                "description": getattr(e, "description", str(e))}


class ChargePoint16(Cp16):
    @on("BootNotification")
    def boot(self, charge_point_vendor, charge_point_model, **_):
        status = "Rejected" if charge_point_vendor == "reject-me" else "Accepted"
        return result16.BootNotification(current_time=now(), interval=300, status=status)

    @after("BootNotification")
    async def probe(self, **_):
        if self.id.startswith("probe"):
            report = {
                "Reset": await outcome(self, call16.Reset(type="Hard")),
                "GetConfiguration": await outcome(self, call16.GetConfiguration()),
                "Bogus": await outcome(self, Bogus()),
            }
            await self.call(call16.DataTransfer(vendor_id="report", data=json.dumps(report)))

    @on("Heartbeat")
    def heartbeat(self):
        return result16.Heartbeat(current_time=now())

    @on("StatusNotification")
    def status(self, **_):
        return result16.StatusNotification()

    @on("Authorize")
    def authorize(self, id_tag):
        return result16.Authorize(id_tag_info={"status": "Invalid" if id_tag == "bad" else "Accepted"})

    @on("DataTransfer")
    async def data_transfer(self, vendor_id, data=None, **_):
        if data == "slow":
            await asyncio.sleep(1.5)
        return result16.DataTransfer(status="Accepted", data=data if vendor_id == "echo" else None)


class ChargePoint201(Cp201):
    @on("BootNotification")
    def boot(self, charging_station, reason, **_):
        status = "Rejected" if charging_station.get("vendor_name") == "reject-me" else "Accepted"
        return result201.BootNotification(current_time=now(), interval=300, status=status)

    @after("BootNotification")
    async def probe(self, **_):
        if self.id.startswith("probe"):
            report = {
                "Reset": await outcome(self, call201.Reset(type="Immediate")),
                "GetVariables": await outcome(self, call201.GetVariables(get_variable_data=[
                    {"component": {"name": "OCPPCommCtrlr"}, "variable": {"name": "HeartbeatInterval"}}])),
                "Bogus": await outcome(self, Bogus()),
            }
            await self.call(call201.DataTransfer(vendor_id="report", data=json.dumps(report)))

    @on("Heartbeat")
    def heartbeat(self):
        return result201.Heartbeat(current_time=now())

    @on("StatusNotification")
    def status(self, **_):
        return result201.StatusNotification()

    @on("Authorize")
    def authorize(self, id_token, **_):
        status = "Invalid" if id_token.get("id_token") == "bad" else "Accepted"
        return result201.Authorize(id_token_info={"status": status})

    @on("DataTransfer")
    async def data_transfer(self, vendor_id, data=None, **_):
        if data == "slow":
            await asyncio.sleep(1.5)
        return result201.DataTransfer(status="Accepted", data=data if vendor_id == "echo" else None)


async def serve(connection):
    path = connection.request.path
    cp_id = path.rstrip("/").split("/")[-1]
    protocol = connection.subprotocol
    if protocol == "ocpp1.6":
        cp = ChargePoint16(cp_id, connection)
    elif protocol == "ocpp2.0.1":
        cp = ChargePoint201(cp_id, connection)
    else:
        await connection.close(1002, "no OCPP subprotocol")
        return
    try:
        await cp.start()
    except websockets.exceptions.ConnectionClosed:
        pass


async def main(port):
    async with websockets.serve(serve, "127.0.0.1", port, subprotocols=["ocpp2.0.1", "ocpp1.6"]):
        print("listening", port, flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
