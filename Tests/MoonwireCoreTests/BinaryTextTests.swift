@testable import MoonwireCore
import Testing

@Suite(.timeLimit(.minutes(5))) struct BinaryTextTests {
    @Test func hexRoundTripsEveryByte() throws {
        let all = (0...255).map { UInt8($0) }
        let text = BinaryText.hex(all)
        #expect(text.count == 512)
        #expect(text.hasPrefix("000102"))
        #expect(try BinaryText.unhex(Array(text.uppercased().utf8)) == all)
        #expect(try BinaryText.unhex(Array("de ad\nbe ef".utf8)) == [0xde, 0xad, 0xbe, 0xef])
    }

    @Test func badHexIsAnError() {
        #expect(throws: BinaryText.DecodeError(description: "odd number of hex digits")) { try BinaryText.unhex(Array("abc".utf8)) }
        #expect(throws: BinaryText.DecodeError(description: "invalid hex digit at offset 1")) { try BinaryText.unhex(Array("0g".utf8)) }
    }

    @Test(arguments: ["", "f", "fo", "foo", "foob", "fooba", "foobar"])
    func base64MatchesRFC4648(plain: String) throws {
        let expected = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        let encoded = BinaryText.base64(Array(plain.utf8))
        #expect(encoded == expected[plain])
        #expect(try BinaryText.unbase64(Array(encoded.utf8)) == Array(plain.utf8))
        let unpadded = encoded.filter { $0 != "=" }
        #expect(try BinaryText.unbase64(Array(unpadded.utf8)) == Array(plain.utf8))
    }

    @Test func base64URLSafeAndBadInput() throws {
        #expect(try BinaryText.unbase64(Array("-_8".utf8)) == [0xfb, 0xff])
        #expect(throws: BinaryText.DecodeError.self) { try BinaryText.unbase64(Array("a$b=".utf8)) }
    }
}
