/// Turns Swift names into SQL names: `userID` → `user_id`, `createdAt` → `created_at`,
/// `URLString` → `url_string`.
enum Naming {
    static func snakeCase(_ name: String) -> String {
        let characters = Array(name)
        var result = ""
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0 {
                let previous = characters[index - 1]
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && nextIsLower) {
                    result.append("_")
                }
            }
            result += character.lowercased()
        }
        return result
    }
}
